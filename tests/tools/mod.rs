//! Running the host tools the chart and monitoring tests check with: helm and promtool, which
//! e2e/tools.sh builds (`eval "$(e2e/tools.sh)"` puts them on PATH; `make test` does), and kubectl.
//! Each test binary (chart, monitoring) uses a part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn output(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {program} ({e}): put it on PATH with `eval \"$(bash e2e/tools.sh)\"`"
            )
        })
}

/// `program args` run from the repository, which must succeed; its stdout.
pub fn run(program: &str, args: &[&str]) -> String {
    let out = output(program, args);
    assert!(
        out.status.success(),
        "{program} {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn helm(args: &[&str]) -> String {
    run("helm", args)
}

/// `helm args`, which must fail; its stderr.
pub fn helm_fails(args: &[&str]) -> String {
    let out = output("helm", args);
    assert!(!out.status.success(), "helm {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}
