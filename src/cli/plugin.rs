//! The binary as a kubectl plugin. kubectl runs an executable `kubectl-flotilla` on the PATH for
//! `kubectl flotilla ...`, and, to complete `kubectl flotilla <TAB>`, one named
//! `kubectl_complete-flotilla` with the words typed so far (kubectl 1.26 and later). Both are
//! links to this binary, told apart by the name it was run as (argv[0]).

use std::ffi::OsStr;
use std::path::Path;

/// The name kubectl looks for on the PATH for `kubectl flotilla`.
pub const PLUGIN: &str = "kubectl-flotilla";
/// The name kubectl runs to complete `kubectl flotilla ...`.
pub const COMPLETION: &str = "kubectl_complete-flotilla";

#[derive(Debug, PartialEq, Eq)]
pub enum Invocation {
    /// `flotilla ...`, or any other name.
    Flotilla,
    /// `kubectl flotilla ...`: the same commands, whose help says `kubectl flotilla`.
    Plugin,
    /// kubectl asking how to complete the words after `kubectl flotilla`.
    Completion,
}

/// How the binary was run, from argv[0] (a path, maybe relative, as the shell or kubectl gave it).
pub fn invocation(argv0: Option<&OsStr>) -> Invocation {
    let name = argv0
        .map(Path::new)
        .and_then(Path::file_name)
        .and_then(OsStr::to_str);
    match name {
        Some(PLUGIN) => Invocation::Plugin,
        Some(COMPLETION) => Invocation::Completion,
        _ => Invocation::Flotilla,
    }
}

/// Cobra's ShellCompDirectiveNoFileComp, which kubectl's completion reads after the candidates:
/// offer these, and no file names.
const NO_FILE_COMPLETION: &str = ":4";

/// What kubectl's completion prints for `words` (the words after `kubectl flotilla`, the last one
/// the word being completed, maybe empty): one candidate a line, with its help after a tab, then
/// the directive. Subcommands, then the long flags of the command the words reach; a flag's
/// possible values after it.
pub fn complete(command: &clap::Command, words: &[String]) -> String {
    let (typed, current) = match words.split_last() {
        Some((current, typed)) => (typed, current.as_str()),
        None => (&[][..], ""),
    };
    let mut command = command;
    let mut globals: Vec<&clap::Arg> = command
        .get_arguments()
        .filter(|a| a.is_global_set())
        .collect();
    for word in typed {
        if let Some(sub) = command.find_subcommand(word) {
            command = sub;
            globals.extend(command.get_arguments().filter(|a| a.is_global_set()));
        }
    }
    let mut lines = Vec::new();
    let flag_before = typed.last().and_then(|w| w.strip_prefix("--"));
    let arguments = || command.get_arguments().chain(globals.iter().copied());
    if let Some(arg) = flag_before.and_then(|name| arguments().find(|a| a.get_long() == Some(name)))
    {
        // The value of a flag: its possible values, if it has a fixed set.
        for value in arg.get_possible_values() {
            lines.push(candidate(value.get_name(), value.get_help()));
        }
    } else if current.starts_with('-') {
        for arg in arguments() {
            if let Some(long) = arg.get_long() {
                lines.push(candidate(&format!("--{long}"), arg.get_help()));
            }
        }
    } else {
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
            lines.push(candidate(sub.get_name(), sub.get_about()));
        }
        // A positional argument with a fixed set of values (`completions <shell>`).
        for arg in command.get_positionals() {
            for value in arg.get_possible_values() {
                lines.push(candidate(value.get_name(), value.get_help()));
            }
        }
    }
    lines.retain(|line| line.starts_with(current));
    lines.push(NO_FILE_COMPLETION.to_string());
    lines.join("\n") + "\n"
}

fn candidate(name: &str, help: Option<&clap::builder::StyledStr>) -> String {
    match help {
        // Only the first line: the completion menu shows one line per candidate.
        Some(help) => format!(
            "{name}\t{}",
            help.to_string().lines().next().unwrap_or_default()
        ),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn the_name_run_as_tells_the_invocation() {
        let cases: [(Option<&str>, Invocation); 7] = [
            (Some("flotilla"), Invocation::Flotilla),
            (Some("/usr/local/bin/flotilla"), Invocation::Flotilla),
            (Some("kubectl-flotilla"), Invocation::Plugin),
            (Some("/home/me/bin/kubectl-flotilla"), Invocation::Plugin),
            (Some("./kubectl_complete-flotilla"), Invocation::Completion),
            (Some("kubectl-flotilla-old"), Invocation::Flotilla),
            (None, Invocation::Flotilla),
        ];
        for (argv0, want) in cases {
            let argv0 = argv0.map(OsString::from);
            assert_eq!(invocation(argv0.as_deref()), want, "{argv0:?}");
        }
    }

    /// A command tree shaped like flotilla's, so that the cases read on their own.
    fn command() -> clap::Command {
        use clap::{Arg, ArgAction, Command};
        Command::new("flotilla")
            .arg(
                Arg::new("config")
                    .long("config")
                    .global(true)
                    .help("The config file"),
            )
            .arg(
                Arg::new("log-format")
                    .long("log-format")
                    .global(true)
                    .value_parser(["text", "json"]),
            )
            .subcommand(
                Command::new("rollout")
                    .about("The fleet's rollout")
                    .subcommand(
                        Command::new("status")
                            .about("Show it")
                            .arg(Arg::new("watch").long("watch").action(ArgAction::SetTrue)),
                    )
                    .subcommand(Command::new("resume").about("Go on")),
            )
            .subcommand(Command::new("render").about("Print objects\n\nMore."))
            .subcommand(
                Command::new("completions").arg(Arg::new("shell").value_parser(["bash", "zsh"])),
            )
    }

    #[test]
    fn completes_subcommands_flags_and_values_as_kubectl_expects_them() {
        let cases: [(&[&str], &str); 8] = [
            (
                &[""],
                "rollout\tThe fleet's rollout\nrender\tPrint objects\ncompletions\n:4\n",
            ),
            (
                &["r"],
                "rollout\tThe fleet's rollout\nrender\tPrint objects\n:4\n",
            ),
            (&["rollout", ""], "status\tShow it\nresume\tGo on\n:4\n"),
            (&["rollout", "st"], "status\tShow it\n:4\n"),
            (
                &["rollout", "status", "--"],
                "--watch\n--config\tThe config file\n--log-format\n:4\n",
            ),
            (
                &["rollout", "status", "--log-format", ""],
                "text\njson\n:4\n",
            ),
            (&["completions", "z"], "zsh\n:4\n"),
            (&["nonsense", "x"], ":4\n"),
        ];
        for (words, want) in cases {
            let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            assert_eq!(complete(&command(), &words), want, "{words:?}");
        }
    }

    #[test]
    fn no_words_complete_as_an_empty_one() {
        assert_eq!(
            complete(&command(), &[]),
            complete(&command(), &[String::new()])
        );
    }
}
