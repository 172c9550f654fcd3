//! Shell completions and man pages, generated from the clap definition: every command and
//! option is in them, the bash script is valid bash, and a folder that cannot be written is
//! refused with its path.

use assert_cmd::Command;

fn kbench() -> Command {
    Command::cargo_bin("kbench").unwrap()
}

const COMMANDS: &[&str] = &[
    "run", "check", "list", "kernels", "compare", "report", "schema",
];

#[test]
fn completions_name_every_command_and_bash_parses_them() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = kbench().args(["completions", shell]).assert().success();
        let script = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        for word in COMMANDS.iter().chain(&["--export", "--save-baseline"]) {
            assert!(script.contains(word), "{shell} completions lack {word}");
        }
        // Those that complete option values offer the formats.
        if ["bash", "zsh", "fish"].contains(&shell) {
            assert!(script.contains("github-action-benchmark"), "{shell}");
        }
        if shell == "bash"
            && std::process::Command::new("bash")
                .arg("--version")
                .output()
                .is_ok()
        {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("kbench.bash");
            std::fs::write(&path, &script).unwrap();
            let checked = std::process::Command::new("bash")
                .arg("-n")
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                checked.status.success(),
                "{}",
                String::from_utf8_lossy(&checked.stderr)
            );
        }
    }
    kbench().args(["completions", "tcsh"]).assert().code(2);
}

#[test]
fn man_pages_cover_every_command() {
    let dir = tempfile::tempdir().unwrap();
    kbench().arg("man").arg(dir.path()).assert().success();
    let main = std::fs::read_to_string(dir.path().join("kbench.1")).unwrap();
    assert!(
        main.starts_with(".ie") || main.contains(".TH kbench"),
        "{main}"
    );
    for command in COMMANDS {
        let page = std::fs::read_to_string(dir.path().join(format!("kbench-{command}.1")))
            .unwrap_or_else(|e| panic!("no page for {command}: {e}"));
        assert!(page.contains(&format!(".TH kbench-{command}")), "{page}");
        assert!(
            main.contains(&format!("kbench\\-{command}(1)")),
            "kbench.1 does not list {command}"
        );
    }
    let report = std::fs::read_to_string(dir.path().join("kbench-report.1")).unwrap();
    assert!(report.contains("github\\-action\\-benchmark"), "{report}");
    assert!(!dir.path().join("kbench-worker.1").exists());

    kbench()
        .args(["man", "/proc/no/such/folder"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("/proc/no/such/folder"));
}
