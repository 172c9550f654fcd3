//! `kbench slurm`: a study as a Slurm job array, one array task per shard (`run --shard K/N`,
//! K from SLURM_ARRAY_TASK_ID), and a merge job that runs after every task has ended
//! (`afterany`: a failed or cancelled task still leaves the others' cases to merge, and the merge
//! lists what is missing). kbench grows no scheduler of its own.
//!
//! Everything goes under one folder: the two batch scripts, `submit.sh` (which submits both,
//! chained by the array's job id), `results/shard-K/` (each task's results), `logs/`, and the
//! merged file `<study>-merged-<merge job id>.json`.
//!
//! A task that finds its shard's results file (requeued, or the scripts submitted again into the
//! same folder) resumes it, or does nothing when it is complete: each shard keeps one file, and
//! a new merge takes them all. A fresh measurement wants a fresh `--out`.
//!
//! Every value written into a script is quoted for its reader: single quotes for bash (`quote`),
//! double quotes with backslash escapes for sbatch's own parser of `#SBATCH` lines
//! (`sbatch_word`). A path holding a control character (a newline would end a comment or an
//! `#SBATCH` line and start a command) is refused, as is a backslash in `--out` (it would turn
//! off the `%a` and `%j` of the log files' names).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::manifest::Manifest;

/// What `kbench slurm` was asked for.
#[derive(Debug, Clone)]
pub struct Request {
    pub shards: u32,
    pub gpus_per_task: Option<u32>,
    pub partition: Option<String>,
    pub time: Option<String>,
    pub exclusive: bool,
    pub out: PathBuf,
}

/// The files written, and how to submit them.
pub struct Written {
    pub array_script: PathBuf,
    pub merge_script: PathBuf,
    pub submit_script: PathBuf,
    pub instructions: String,
}

/// A word for the shell, in single quotes.
pub fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// A value for an `#SBATCH` line, as sbatch's parser reads it: in double quotes, with `\`, `"`,
/// `'` and `#` escaped by a backslash (an unescaped `#` starts a comment even in quotes, for
/// older sbatch). Bash never reads these lines: they are comments to it.
pub fn sbatch_word(word: &str) -> String {
    let mut quoted = String::from('"');
    for c in word.chars() {
        if matches!(c, '\\' | '"' | '\'' | '#') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

/// Refuses text with a control character: in a script, a newline would end the comment or
/// `#SBATCH` line holding it and start a command.
fn check_script_text(what: &str, text: &str) -> Result<()> {
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        bail!(
            "{what} {text:?} holds the control character {}: it cannot be written into a batch \
             script safely; rename it",
            c.escape_unicode()
        );
    }
    Ok(())
}

/// `#SBATCH` values such as `--time` go to sbatch as they are: one word, without quotes.
fn check_sbatch_value(flag: &str, value: &str) -> Result<()> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_:.,+=@/".contains(c);
    if value.is_empty() || !value.chars().all(plain) {
        bail!(
            "--{flag} {value:?}: expected one word of letters, digits and `-_:.,+=@/` (it goes \
             into an #SBATCH line as it is)"
        );
    }
    Ok(())
}

/// Absolute paths the scripts name, checked to fit a batch script.
struct ScriptPaths {
    /// The folder everything goes under (`--out`), created and canonical.
    out: PathBuf,
    out_s: String,
    manifest_s: String,
    exe_s: String,
    /// The folder `kbench slurm` ran in: the array tasks run kbench there, so a file axis's
    /// relative paths and globs name the files `kbench slurm` checked.
    cwd_s: String,
}

/// Writes the batch scripts and `submit.sh` under `request.out` (created if need be) and says
/// how to submit them. The scripts name the kbench executable, the manifest and the folder by
/// their absolute paths: a cluster's nodes must see them at the same paths (a shared filesystem).
pub fn write_scripts(manifest: &Manifest, request: &Request) -> Result<Written> {
    if let Some(p) = &request.partition {
        check_sbatch_value("partition", p)?;
    }
    if let Some(t) = &request.time {
        check_sbatch_value("time", t)?;
    }
    let paths = resolve_paths(manifest, request)?;
    let study = &manifest.study.name;
    let header = script_header(study, &paths, request.shards);
    let common = common_sbatch_lines(request, &paths)?;
    let array = array_script_text(header.clone(), &common, study, &paths, request)?;
    let merge = merge_script_text(header, &common, study, &paths)?;

    let array_script = paths.out.join(format!("{study}.array.sbatch"));
    let merge_script = paths.out.join(format!("{study}.merge.sbatch"));
    let submit_script = paths.out.join("submit.sh");
    let submit = submit_script_text(study, request.shards, &paths, &array_script, &merge_script)?;
    for (path, text) in [
        (&array_script, &array),
        (&merge_script, &merge),
        (&submit_script, &submit),
    ] {
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let instructions = format!(
        "wrote {array}\n      {merge}\n      {submit}\n\
         submit with:\n  bash {submit}\n\
         (or by hand: `sbatch --parsable {array}`, then `sbatch --dependency=afterany:<its job id> {merge}`)\n\
         the merged file is {out}/{study}-merged-<merge job id>.json; if the merge lists missing cases,\n\
         run them into it with `kbench run --resume <that file>{devices}`\n",
        array = array_script.display(),
        merge = merge_script.display(),
        submit = submit_script.display(),
        out = paths.out.display(),
        devices = devices_flag(request),
    );
    Ok(Written {
        array_script,
        merge_script,
        submit_script,
        instructions,
    })
}

/// Creates `--out` (and its `logs/`) and resolves the three paths the scripts name.
fn resolve_paths(manifest: &Manifest, request: &Request) -> Result<ScriptPaths> {
    std::fs::create_dir_all(request.out.join("logs"))
        .with_context(|| format!("--out {}: cannot create it", request.out.display()))?;
    let out = request
        .out
        .canonicalize()
        .with_context(|| format!("--out {}", request.out.display()))?;
    let manifest_path = manifest
        .path
        .canonicalize()
        .with_context(|| format!("{}", manifest.path.display()))?;
    let exe = std::env::current_exe()
        .and_then(|e| e.canonicalize())
        .context("cannot find the kbench executable")?;
    let cwd = std::env::current_dir().context("cannot find the current folder")?;
    let (out_s, manifest_s, exe_s, cwd_s) = (
        path_text(&out)?,
        path_text(&manifest_path)?,
        path_text(&exe)?,
        path_text(&cwd)?,
    );
    check_script_text("--out", &out_s)?;
    check_script_text("the manifest's path", &manifest_s)?;
    check_script_text("the kbench executable's path", &exe_s)?;
    check_script_text("the current folder", &cwd_s)?;
    if out_s.contains('\\') {
        bail!(
            "--out {out_s:?} holds a backslash: Slurm would then not replace the %a and %j of \
             the log files' names; choose a folder without one"
        );
    }
    Ok(ScriptPaths {
        out,
        out_s,
        manifest_s,
        exe_s,
        cwd_s,
    })
}

/// A path as text for a script; a path that is not UTF-8 cannot be written into one.
fn path_text(p: &Path) -> Result<String> {
    match p.to_str() {
        Some(s) => Ok(s.to_string()),
        None => bail!(
            "{} is not UTF-8: it cannot go into a batch script",
            p.display()
        ),
    }
}

/// `--output`'s value: a log file `name` (with Slurm's `%a` or `%j`) under `out`'s `logs/`, a `%`
/// of `out` itself doubled so that Slurm keeps it.
fn log_pattern(out_s: &str, name: &str) -> String {
    sbatch_word(&format!("{}/logs/{name}", out_s.replace('%', "%%")))
}

/// The first lines of both batch scripts: the shell, and what wrote them for which study.
fn script_header(study: &str, paths: &ScriptPaths, shards: u32) -> String {
    let manifest_s = &paths.manifest_s;
    format!(
        "#!/bin/bash\n# Written by `kbench slurm` for study `{study}` ({manifest_s}): {shards} shards.\n"
    )
}

/// The `#SBATCH` lines both scripts share: partition, time limit and working folder.
fn common_sbatch_lines(request: &Request, paths: &ScriptPaths) -> Result<String> {
    let mut common = String::new();
    if let Some(p) = &request.partition {
        writeln!(common, "#SBATCH --partition={p}")?;
    }
    if let Some(t) = &request.time {
        writeln!(common, "#SBATCH --time={t}")?;
    }
    writeln!(common, "#SBATCH --chdir={}", sbatch_word(&paths.out_s))?;
    Ok(common)
}

/// Slurm sets CUDA_VISIBLE_DEVICES to the task's GPUs: `--devices all` runs on those.
fn devices_flag(request: &Request) -> &'static str {
    if request.gpus_per_task.is_some() {
        " --devices all"
    } else {
        ""
    }
}

/// The job array's script: one task per shard, each running (or resuming) its shard.
fn array_script_text(
    header: String,
    common: &str,
    study: &str,
    paths: &ScriptPaths,
    request: &Request,
) -> Result<String> {
    let (out_s, n) = (&paths.out_s, request.shards);
    let mut array = header;
    writeln!(
        array,
        "#SBATCH --job-name={}",
        sbatch_word(&format!("kbench-{study}"))
    )?;
    writeln!(array, "#SBATCH --array=1-{n}")?;
    writeln!(array, "#SBATCH --ntasks=1")?;
    writeln!(
        array,
        "#SBATCH --output={}",
        log_pattern(out_s, "shard-%a.out")
    )?;
    if let Some(g) = request.gpus_per_task {
        writeln!(array, "#SBATCH --gpus-per-task={g}")?;
    }
    if request.exclusive {
        writeln!(array, "#SBATCH --exclusive")?;
    }
    array.push_str(common);
    array.push_str("set -u\n");
    // Relative paths and globs of a file axis name files relative to the folder `kbench slurm`
    // checked them in; the job itself runs in --out (--chdir) for its logs.
    writeln!(
        array,
        "cd {} || {{ echo \"kbench: cannot enter the folder kbench slurm ran in\" >&2; exit 2; }}",
        quote(&paths.cwd_s)
    )?;
    let devices = devices_flag(request);
    // A requeued task, or a second submission into the same folder, finds its shard's file:
    // it completes that file (or leaves a complete one be), so each shard keeps one file and
    // the merge sees no overlap. A fresh measurement wants a fresh --out.
    writeln!(
        array,
        "shard_dir={}/results/shard-\"${{SLURM_ARRAY_TASK_ID}}\"\n\
         shopt -s nullglob\n\
         earlier=(\"$shard_dir\"/{}/*.json)\n\
         if [ ${{#earlier[@]}} -gt 1 ]; then\n  \
           echo \"kbench: $shard_dir holds ${{#earlier[@]}} results files of this shard; keep one (the merge takes one per shard)\" >&2\n  \
           exit 2\n\
         fi\n\
         if [ ${{#earlier[@]}} -eq 1 ]; then\n  \
           if grep -q '^  \"complete\": true' \"${{earlier[0]}}\"; then\n    \
             echo \"kbench: ${{earlier[0]}} is complete: shard ${{SLURM_ARRAY_TASK_ID}} has nothing left to run\"\n    \
             exit 0\n  \
           fi\n  \
           echo \"kbench: resuming ${{earlier[0]}} (an earlier run of shard ${{SLURM_ARRAY_TASK_ID}}, requeued or submitted again)\"\n  \
           exec {exe} run --resume \"${{earlier[0]}}\"{devices}\n\
         fi\n\
         exec {exe} run {} --shard \"${{SLURM_ARRAY_TASK_ID}}/{n}\" --out-dir \"$shard_dir\"{devices}",
        quote(out_s),
        quote(study),
        quote(&paths.manifest_s),
        exe = quote(&paths.exe_s),
    )?;
    Ok(array)
}

/// The merge job's script: every shard's results file merged into one.
fn merge_script_text(
    header: String,
    common: &str,
    study: &str,
    paths: &ScriptPaths,
) -> Result<String> {
    let out_s = &paths.out_s;
    let mut merge = header;
    writeln!(
        merge,
        "#SBATCH --job-name={}",
        sbatch_word(&format!("kbench-{study}-merge"))
    )?;
    writeln!(merge, "#SBATCH --ntasks=1")?;
    writeln!(
        merge,
        "#SBATCH --output={}",
        log_pattern(out_s, "merge-%j.out")
    )?;
    merge.push_str(common);
    merge.push_str("set -u\nshopt -s nullglob\n");
    writeln!(
        merge,
        "files=({}/results/shard-*/{}/*.json)",
        quote(out_s),
        quote(study)
    )?;
    writeln!(
        merge,
        "if [ ${{#files[@]}} -eq 0 ]; then\n  echo \"kbench merge: no shard wrote a results file (see \"{}\")\" >&2\n  exit 1\nfi",
        quote(&format!("{out_s}/logs"))
    )?;
    writeln!(
        merge,
        "# Exit 1 when cases are missing: they are listed, and the merged file is written all the same."
    )?;
    writeln!(
        merge,
        "exec {} merge \"${{files[@]}}\" -o {}/{}-merged-\"${{SLURM_JOB_ID}}\".json",
        quote(&paths.exe_s),
        quote(out_s),
        quote(study)
    )?;
    Ok(merge)
}

/// `submit.sh`: submits the array, then the merge chained after it with `afterany`.
fn submit_script_text(
    study: &str,
    shards: u32,
    paths: &ScriptPaths,
    array_script: &Path,
    merge_script: &Path,
) -> Result<String> {
    Ok(format!(
        "#!/bin/bash\n# Submits study `{study}`: the shards as a job array, then the merge once every shard has ended.\n\
         set -euo pipefail\n\
         array=$(sbatch --parsable {array_q})\n\
         array=${{array%%;*}}\n\
         merge=$(sbatch --parsable --dependency=afterany:\"$array\" {merge_q})\n\
         merge=${{merge%%;*}}\n\
         echo \"shards: job $array (array 1-{shards}); merge: job $merge\"\n\
         echo \"merged results: \"{merged_q}\"$merge.json\"\n",
        merged_q = quote(&format!("{}/{study}-merged-", paths.out_s)),
        array_q = quote(&path_text(array_script)?),
        merge_q = quote(&path_text(merge_script)?),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_for_the_shell() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn sbatch_words_escape_what_sbatch_reads_specially() {
        assert_eq!(sbatch_word("/a b/c"), r#""/a b/c""#);
        assert_eq!(sbatch_word(r##"x"#y'z\w"##), r##""x\"\#y\'z\\w""##);
        assert_eq!(
            log_pattern("/o/100%", "shard-%a.out"),
            r#""/o/100%%/logs/shard-%a.out""#
        );
    }

    #[test]
    fn control_characters_cannot_go_into_a_script() {
        assert!(check_script_text("--out", "/tmp/a b$(x)`y`").is_ok());
        let e = check_script_text("--out", "/tmp/a\ntouch PWNED").unwrap_err();
        assert!(e.to_string().contains(r"\u{a}"), "{e}");
    }

    #[test]
    fn sbatch_values_are_one_word() {
        assert!(check_sbatch_value("time", "1:00:00").is_ok());
        assert!(check_sbatch_value("partition", "gpu x").is_err());
        assert!(check_sbatch_value("partition", "").is_err());
    }
}
