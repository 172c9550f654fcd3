//! `kbench run` on a real terminal (a pseudo-terminal from util-linux's `script`, 80 columns):
//! the progress bar fits the width, shows the time left, and is wiped when the run is
//! interrupted, so neither the interrupt's message nor the shell's prompt lands on a stale bar.

use std::path::Path;

/// Long enough that the interrupt comes while cases are still running: 60 cases of about a
/// tenth of a second each.
fn slow_study() -> String {
    let sizes: Vec<String> = (1500..1560).map(|n| n.to_string()).collect();
    format!(
        "[study]\nname = \"slow\"\nalgorithm = \"durbin\"\nseed = 1\n\
         [grid]\nn = [{}]\n\
         [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [measure]\nwarmup = 1\nmin_samples = 30\nmax_samples = 30\n",
        sizes.join(", ")
    )
}

#[test]
fn the_bar_fits_80_columns_shows_the_time_left_and_is_wiped_on_interrupt() {
    // `script` is util-linux's (bsdutils on Debian, an essential package): a terminal to test on.
    let script = ["/usr/bin/script", "/bin/script"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("util-linux's `script` is needed to give kbench a terminal");
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("slow.toml");
    std::fs::write(&manifest, slow_study()).unwrap();
    // stdout to a file, the bar on the terminal's stderr; SIGTERM is handled as Ctrl-C is.
    let command = format!(
        "stty cols 80 rows 24; {} run {} --out-dir {} > /dev/null & sleep 3; kill -TERM $!; wait",
        env!("CARGO_BIN_EXE_kbench"),
        manifest.display(),
        dir.path().join("out").display(),
    );
    let output = std::process::Command::new(script)
        .args(["-qec", &command, "/dev/null"])
        .env("COLUMNS", "80")
        .env_remove("KBENCH_MOCK_GPU")
        .output()
        .unwrap();
    let terminal = String::from_utf8_lossy(&output.stdout).to_string();
    let interrupt = terminal
        .find("interrupt: abandoning")
        .unwrap_or_else(|| panic!("the run was not interrupted: {terminal:?}"));
    let (before, after) = terminal.split_at(interrupt);
    // Each drawing of the bar: the text between line clears and carriage returns.
    let draws: Vec<&str> = before
        .split(['\r', '\n'])
        .flat_map(|s| s.split("\u{1b}[2K"))
        .filter(|s| s.contains(" cases, "))
        .collect();
    assert!(!draws.is_empty(), "no bar was drawn: {terminal:?}");
    for draw in &draws {
        let plain = anstream::adapter::strip_str(draw).to_string();
        let columns = unicode_width::UnicodeWidthStr::width(plain.as_str());
        assert!(columns <= 80, "a bar of {columns} columns: {plain:?}");
        assert!(plain.contains("(ETA "), "no time left shown: {plain:?}");
    }
    // The bar is wiped before the message (a line clear right before it), and never drawn again.
    assert!(
        before.ends_with("\u{1b}[2K"),
        "the bar was left on screen: {:?}",
        &before[before.len().saturating_sub(200)..]
    );
    assert!(!after.contains(" cases, "), "the bar came back: {after:?}");
    assert!(after.contains("interrupted: "), "{after:?}");
}
