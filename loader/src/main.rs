//! `loader`: parse the command line, run, print the report. See the crate docs of `loader`.
fn main() {
    let cli: loader::cli::Cli = shared::config::parse_cli();
    std::process::exit(loader::cli::run_command(cli));
}
