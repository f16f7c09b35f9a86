mod cli;

/// mimalloc rather than glibc's malloc: an import decodes lines on one thread and frees them
/// on the one that writes them to SQLite, which glibc serialises on the reading thread's arena;
/// side by side, the rows phase of a 10,000-conversation import took 15–20% less. Built without
/// transparent huge pages (Cargo.toml says why).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // Die quietly when the reader of our output goes away (`sessiondb list | head`), as Unix
    // tools do, instead of failing on the broken pipe. This is the one broken-pipe mechanism:
    // the commands do not look for `ErrorKind::BrokenPipe`. A signal covers every write at
    // once — `println!`, `say!`, streamed documents, messages on standard error — where
    // checking errors would need every print to be fallible (Rust's `println!` panics on a
    // broken pipe); and nothing is left half-done that matters: the store's writes are SQLite
    // transactions and the directory writes are atomic, both made to survive being killed.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(cli::run());
}
