fn main() {
    std::process::exit(sessiondb::cli::run());
}
