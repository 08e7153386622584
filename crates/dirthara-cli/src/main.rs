//! `dirthara`: a thin shell over the library. Parse → validated config → one library call
//! → render; exit codes are decided in one place, [`exit`].

mod cli;
mod commands;
mod error;
mod exit;
mod flags;
mod fleet;
mod lint;
mod render;
mod scaffold;
mod schema;
mod settings;
mod summary;
mod telemetry;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Tests only: the library's planted faults that FAILPOINTS switches on.
    #[cfg(feature = "failpoints")]
    let _planted_faults = dirthara::planted_faults_from_env();
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
            return exit::failed_to_start();
        }
    };
    let summary_file = cli.global.summary_file.clone();
    let command = summary::command_name(&cli.command);
    let mut facts = summary::Facts::default();
    let export = telemetry::Export::start(command, &renderer);
    let outcome = runtime.block_on(commands::execute(cli, renderer, &export, &mut facts));
    if let Err(failure) = &outcome {
        renderer.error(&failure.error);
    }
    export.finish(
        outcome.as_ref().err().map(|failure| &failure.error),
        &renderer,
    );
    let code = exit::exit_code(&outcome);
    ExitCode::from(match summary_file {
        Some(path) => summary::write_summary(&path, command, &outcome, code, facts, &renderer),
        None => code,
    })
}
