mod cli;

fn main() {
    // Die quietly when the reader of our output goes away (`sessiondb list | head`), as Unix
    // tools do, instead of failing on the broken pipe.
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(cli::run());
}
