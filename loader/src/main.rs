//! `loader`: parse the command line, run, print the report. See the crate docs of `loader`.
fn main() {
    let cli: loader::cli::Cli = shared::config::parse_cli();
    if let Some(shell) = cli.completions {
        use clap::CommandFactory;
        shared::config::print_completions(shell, loader::cli::Cli::command());
        return;
    }
    std::process::exit(loader::cli::run_command(cli));
}
