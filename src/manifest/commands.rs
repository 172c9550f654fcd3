//! A custom study's external commands, as `[custom]` declares them and checked: the reference
//! command, which computes the expected outputs (`reference_command`), and the check command,
//! which judges a case's answer (`check_command`). `crate::reference_command` runs them.

use std::ops::Range;
use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::{ManifestError, Validator};
use crate::custom::def::{BufferDecl, CommandDecl, Expected, Init};

/// How long a command may run for one case unless the manifest says.
pub const DEFAULT_COMMAND_TIMEOUT_S: f64 = 60.0;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReferenceCommand {
    /// The program and its arguments, run without a shell in the manifest's folder (a program
    /// named by a path, `./ref.sh`, is relative to it). It finds the inputs as `<buffer>.npy` in
    /// the folder `$KBENCH_INPUTS`, the case's axis values as a JSON object in `$KBENCH_PARAMS`,
    /// and writes each output as `<buffer>.npy` into the folder `$KBENCH_OUTPUTS`.
    #[schemars(with = "Vec<String>")]
    argv: Spanned<Vec<String>>,
    /// Past this many seconds the command is stopped and the case fails. Default 60.
    #[schemars(with = "Option<f64>")]
    timeout_s: Option<Spanned<f64>>,
    /// The axes the command's answer depends on (default: every axis); `$KBENCH_PARAMS` then
    /// holds these alone. Cases that agree on them (and on every buffer's type and length)
    /// share one run of the command: leave out the knobs a tuner varies (block sizes, tiles),
    /// and a study of many configurations runs it once per problem.
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    axes: Option<Spanned<Vec<String>>>,
    /// Run for every case, told its variant's name in `$KBENCH_VARIANT` and its kernel
    /// sequence in `$KBENCH_KERNEL` (default: once for all the variants of a grid point, which
    /// share their inputs and so their answer).
    #[serde(default)]
    #[schemars(with = "Option<bool>")]
    per_variant: Option<Spanned<bool>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCheckCommand {
    /// The program and its arguments, run without a shell in the manifest's folder after each
    /// checked case's runs. It finds the inputs, the case's outputs and their references
    /// (float64) as `<buffer>.npy` in the folders `$KBENCH_INPUTS`, `$KBENCH_OUTPUTS` and
    /// `$KBENCH_REFERENCES`, the case's axis values in `$KBENCH_PARAMS`, its variant in
    /// `$KBENCH_VARIANT`; it exits 0 for a right answer, 1 for a wrong one (what it prints is
    /// the reason).
    #[schemars(with = "Vec<String>")]
    argv: Spanned<Vec<String>>,
    /// Past this many seconds the command is stopped and the case is an error. Default 60.
    #[schemars(with = "Option<f64>")]
    timeout_s: Option<Spanned<f64>>,
}

impl Validator<'_> {
    /// `[custom] reference_command`, checked: a program, a positive time limit, its axes, and
    /// outputs that use it; and no output that expects it when it is missing. `expected_at(i)`
    /// is where buffer `i` says what it expects.
    pub(super) fn custom_reference_command(
        &self,
        raw: Option<&Spanned<RawReferenceCommand>>,
        buffers: &[BufferDecl],
        expected_at: &dyn Fn(usize) -> Range<usize>,
        axis_names: &[String],
        dir: &Path,
    ) -> Result<Option<CommandDecl>, ManifestError> {
        let key = "custom.reference_command";
        let users = buffers
            .iter()
            .position(|b| b.expected == Some(Expected::Command));
        let Some(command) = raw else {
            let Some(i) = users else { return Ok(None) };
            return Err(self.error(expected_at(i), format!("custom.buffer[{i}].expected"), format!(
                "output `{}` is checked against the reference command, and [custom] declares none: add `reference_command = {{ argv = [\"python3\", \"reference.py\"] }}` to [custom]",
                buffers[i].name
            )));
        };
        let raw = command.get_ref();
        let (argv, timeout_s) = self.command(&raw.argv, raw.timeout_s.as_ref(), key, dir)?;
        if users.is_none() {
            return Err(self.error(raw.argv.span(), key, "no output is checked against the reference command: give an output `expected = \"command\"`, or leave `reference` out of [custom] so that outputs default to it".into()));
        }
        let axes = match &raw.axes {
            Some(axes) => Some(self.reference_axes(axes, buffers, axis_names)?),
            None => None,
        };
        Ok(Some(CommandDecl {
            argv,
            working_dir: dir.to_path_buf(),
            timeout_s,
            axes,
            per_variant: raw.per_variant.as_ref().is_some_and(|p| *p.get_ref()),
        }))
    }

    /// `[custom] check_command`, checked: a program and a positive time limit; and no output
    /// that expects it when it is missing.
    pub(super) fn custom_check_command(
        &self,
        raw: Option<&Spanned<RawCheckCommand>>,
        buffers: &[BufferDecl],
        expected_at: &dyn Fn(usize) -> Range<usize>,
        dir: &Path,
    ) -> Result<Option<CommandDecl>, ManifestError> {
        let Some(command) = raw else {
            let users = (buffers.iter()).position(|b| b.expected == Some(Expected::CheckCommand));
            let Some(i) = users else { return Ok(None) };
            return Err(self.error(expected_at(i), format!("custom.buffer[{i}].expected"), format!(
                "output `{}` is judged by the check command, and [custom] declares none: add `check_command = {{ argv = [\"python3\", \"check.py\"] }}` to [custom]",
                buffers[i].name
            )));
        };
        let raw = command.get_ref();
        let key = "custom.check_command";
        let (argv, timeout_s) = self.command(&raw.argv, raw.timeout_s.as_ref(), key, dir)?;
        Ok(Some(CommandDecl {
            argv,
            working_dir: dir.to_path_buf(),
            timeout_s,
            axes: None,
            per_variant: true,
        }))
    }

    /// A command's `argv` and `timeout_s`, checked: a program that is there and may be run (a
    /// path is made absolute against the manifest's folder; a bare name is looked up on PATH)
    /// and a positive time limit (default `DEFAULT_COMMAND_TIMEOUT_S`).
    fn command(
        &self,
        argv: &Spanned<Vec<String>>,
        timeout_s: Option<&Spanned<f64>>,
        key: &str,
        dir: &Path,
    ) -> Result<(Vec<String>, f64), ManifestError> {
        let argv_span = argv.span();
        let fail =
            |message: String| Err(self.error(argv_span.clone(), format!("{key}.argv"), message));
        let mut argv = argv.get_ref().clone();
        let Some(program) = argv.first_mut().filter(|p| !p.trim().is_empty()) else {
            return fail("`argv` names no program: give the program and its arguments, e.g. [\"python3\", \"reference.py\"]".into());
        };
        if program.contains('/') {
            // A path is the manifest's, whatever folder kbench runs in.
            let path = dir.join(&*program);
            // A results file's study is not checked for its programs: they run only once a
            // manifest on disk names them (`run --resume`).
            if self.files.on_disk() && !path.is_file() {
                return fail(format!(
                    "no program `{}` (a path is relative to the manifest)",
                    path.display()
                ));
            }
            if self.files.on_disk() && !crate::env::is_executable(&path) {
                return fail(format!(
                    "`{}` is not executable: `chmod +x` it, or name its interpreter first ([\"python3\", \"{}\"])",
                    path.display(),
                    argv[0]
                ));
            }
            argv[0] = path.display().to_string();
        } else if self.files.on_disk() && crate::env::find_on_path(program).is_none() {
            return fail(format!(
                "no program `{program}` on PATH: install it, or name it by its path"
            ));
        }
        let timeout_s = match timeout_s {
            Some(t) if !(t.get_ref().is_finite() && *t.get_ref() > 0.0) => {
                return Err(self.error(
                    t.span(),
                    format!("{key}.timeout_s"),
                    format!(
                        "`timeout_s` must be a positive number of seconds, not {}",
                        t.get_ref()
                    ),
                ))
            }
            Some(t) => *t.get_ref(),
            None => DEFAULT_COMMAND_TIMEOUT_S,
        };
        Ok((argv, timeout_s))
    }

    /// `reference_command.axes`, checked: axes of the study, each once, and every one an
    /// input's `init` expression reads among them (else cases sharing the command's answer
    /// would not share their inputs).
    fn reference_axes(
        &self,
        axes: &Spanned<Vec<String>>,
        buffers: &[BufferDecl],
        axis_names: &[String],
    ) -> Result<Vec<String>, ManifestError> {
        let key = "custom.reference_command.axes";
        let fail = |message: String| Err(self.error(axes.span(), key, message));
        for (i, axis) in axes.get_ref().iter().enumerate() {
            if !axis_names.contains(axis) {
                return fail(format!(
                    "no axis `{axis}`: the study's axes are {}",
                    axis_names.join(", ")
                ));
            }
            if axes.get_ref()[..i].contains(axis) {
                return fail(format!("axis `{axis}` is named twice"));
            }
        }
        for buffer in buffers {
            let (Init::Expr(text) | Init::Offsets(text)) = &buffer.init else {
                continue;
            };
            let Ok(expr) = crate::expr::Expr::parse(text) else {
                continue;
            };
            let read = expr.names().into_iter().map(|(name, _)| name.to_string());
            if let Some(axis) = read
                .filter(|name| axis_names.contains(name))
                .find(|name| !axes.get_ref().contains(name))
            {
                return fail(format!(
                    "buffer `{}`'s init reads axis `{axis}`, which these axes leave out: cases that share the command's answer would not share their inputs; add `{axis}`",
                    buffer.name
                ));
            }
        }
        Ok(axes.get_ref().clone())
    }
}
