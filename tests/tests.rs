//! The integration tests, as one test binary (as ripgrep's `tests/tests.rs`): each former
//! `tests/<name>.rs` binary is a module here, so the crate is linked once instead of once per
//! file. Run one module with a name filter, e.g. `cargo nextest run --test integration trust::`.
//!
//! Run by `tools/test.sh` with cargo-nextest, which gives every test a process of its own; under
//! plain `cargo test` the tests share one process, which none of them relies on (no test changes
//! its environment, its current directory or other process-wide state).

mod common;

mod answers;
mod archive;
mod cli;
mod cli_trust;
mod codec_props;
mod completion;
mod concurrency;
mod crash_ops;
mod db_faults;
mod differential_ops;
mod first_hour;
mod first_hour_again;
mod fuzz_regressions;
mod hostile;
mod html_browser;
mod import_errors;
mod interop_gptme;
mod layering;
mod mcp;
mod mcp_agents;
mod migrations;
mod ops_interop;
mod pg_trust;
mod planted_links;
mod postgres;
mod roundtrip;
mod scale;
mod search;
mod secrets;
mod serve;
mod serve_trust;
mod sources;
mod store_props;
mod sync;
mod sync_crash;
mod sync_watch;
mod terminal_output;
mod texts;
mod trust;
