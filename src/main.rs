//! The kbench command line: parse it, hand the command to its function in `kbench::commands`,
//! exit with the status it returns (`kbench::exit::Exit` numbers them; README.md's "Exit
//! codes" says what each means). The grammar is `kbench::cli`; `kbench run`'s work is the
//! library's run session, `kbench::run::session`. Commands print through `kbench::output`, so a
//! closed pipe (`kbench schema | head -1`) ends nothing early and nothing panics.

use std::process::ExitCode;

use clap::Parser;

use kbench::cli::{Cli, Command};
use kbench::commands::{check, compare, docs, history, kernels, merge, report, run, slurm, tune};

fn main() -> ExitCode {
    // CUDA's ordinals as `nvidia-smi` numbers the GPUs (see record::CaseDevice), for
    // `device::count` here and the workers, which inherit it; set while no other thread runs.
    if std::env::var_os(kbench::device::DEVICE_ORDER_ENV).is_none() {
        std::env::set_var(kbench::device::DEVICE_ORDER_ENV, "PCI_BUS_ID");
    }
    let cli = Cli::parse();
    kbench::report::style::set_color(cli.color);
    let exit = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Check { manifests, verbose } => check::check(&manifests, verbose),
        Command::List => check::list(),
        Command::Kernels(args) => kernels::kernels(args),
        Command::Compare(args) => compare::compare(args),
        Command::History(args) => history::history(args),
        Command::Report(args) => report::report(args),
        Command::Merge(args) => merge::merge(args),
        Command::Slurm(args) => slurm::slurm(args),
        Command::Tune(args) => tune::tune(args),
        Command::Schema { of } => docs::schema(of),
        Command::Completions { shell } => docs::completions(shell),
        Command::Man { out_dir } => docs::man_pages(&out_dir),
        Command::Worker => run::worker(),
    };
    // A command that could not write its stdout (not a reader gone: see kbench::output) failed.
    kbench::output::exit_status(exit).into()
}
