//! `dirthara`: a thin shell over the library. Parse → validated config → one library call
//! → render; exit codes are decided in one place, [`exit_code`].

mod cli;
mod commands;
mod error;
mod render;
mod scaffold;
mod settings;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let renderer = render::Renderer {
        format: cli.global.output,
        quiet: cli.global.quiet,
        verbose: cli.global.verbose,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            renderer.error(&error::CliError::io(error::IoAction::StartRuntime)(e));
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(commands::execute(cli, renderer));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            renderer.error(&failure.error);
            exit_code(&failure)
        }
    }
}

/// 1 for every error; 130 / 143 when a SIGINT / SIGTERM interrupted the run.
fn exit_code(failure: &commands::Failure) -> ExitCode {
    match (failure.error.is_interrupted(), failure.signal) {
        (true, Some(commands::Signal::Terminate)) => ExitCode::from(143),
        (true, _) => ExitCode::from(130),
        (false, _) => ExitCode::FAILURE,
    }
}
