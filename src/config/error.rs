//! What is wrong with a config file, carried as fields (file, key, line), written out once in
//! the form the README shows:
//!
//! ```text
//! flotilla.yaml: line 2 column 14: concurrency: invalid u16
//! flotilla.yaml: line 1: selector: invalid label selector "env in (a": unbalanced '('
//! ```

use crate::overrides::OverrideError;
use crate::selector::{InvalidSelector, LabelError};
use crate::yaml_error::YamlError;
use std::fmt;
use std::path::PathBuf;

/// None of these has a `source()`: each message is whole, and the binary's edge prints an
/// error with its sources (`{:#}`), which would repeat them.
#[derive(Debug)]
pub enum ConfigError {
    Read {
        path: String,
        error: std::io::Error,
    },
    /// Not YAML, or not flotilla's schema (an unknown key, a wrong type). `key` is the key set
    /// on the line the parser stopped at, where its reason does not name it already.
    Yaml {
        path: String,
        key: Option<String>,
        error: YamlError,
    },
    /// A value flotilla refuses; `line` is the line that sets `key` (a dotted path), if the
    /// file sets it on a line of its own.
    Invalid {
        path: String,
        key: String,
        line: Option<usize>,
        problem: ConfigProblem,
    },
}

impl std::error::Error for ConfigError {}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Read { path, error } => write!(f, "{path}: cannot read: {error}"),
            ConfigError::Yaml { path, key, error } => {
                write!(f, "{path}: ")?;
                if let Some(at) = error.position {
                    write!(f, "line {} column {}: ", at.line, at.column)?;
                }
                if let Some(key) = key {
                    write!(f, "{key}: ")?;
                }
                f.write_str(&error.reason)?;
                // The parser's drawing of the spot, for a terminal.
                match &error.quoted_lines {
                    Some(lines) => write!(f, "\n{lines}"),
                    None => Ok(()),
                }
            }
            ConfigError::Invalid {
                path,
                key,
                line,
                problem,
            } => match line {
                Some(line) => write!(f, "{path}: line {line}: {key}: {problem}"),
                None => write!(f, "{path}: {key}: {problem}"),
            },
        }
    }
}

/// Why a value was refused; the message follows its key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigProblem {
    #[error(transparent)]
    Selector(InvalidSelector),
    #[error(transparent)]
    Label(LabelError),
    #[error("must not be empty")]
    Empty,
    #[error("{0:?} is not a valid namespace name (lowercase alphanumerics and '-', at most 63)")]
    NamespaceName(String),
    #[error("must be {min}-{max} characters")]
    Length { min: usize, max: usize },
    #[error("must be at least {0}")]
    AtLeast(u64),
    #[error("{0}")]
    Amount(String),
    #[error(transparent)]
    Override(OverrideError),
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("{0:?} is flotilla's own namespace, which holds its credentials: it is never a target")]
    OwnNamespaceAllowed(String),
    #[error(
        "{0:?} is not a reserved namespace ({reserved}): a namespace the selector matches is a target already",
        reserved = crate::config::RESERVED_NAMESPACES.join(", ")
    )]
    NotReserved(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selector::SelectorError;
    use crate::yaml_error::Position;

    fn yaml(position: Option<(usize, usize)>, quoted_lines: Option<&str>) -> YamlError {
        YamlError {
            position: position.map(|(line, column)| Position { line, column }),
            reason: "invalid u16".into(),
            quoted_lines: quoted_lines.map(str::to_string),
        }
    }

    fn invalid(key: &str, line: Option<usize>, problem: ConfigProblem) -> ConfigError {
        ConfigError::Invalid {
            path: "flotilla.yaml".into(),
            key: key.into(),
            line,
            problem,
        }
    }

    /// The config files behind the README's example errors (Configuration), in its order.
    const README_EXAMPLES: [&str; 3] = [
        "selectr: x\n",
        "selector: a=b\nconcurrency: 70000\n",
        "selector: env in (a\n",
    ];

    #[test]
    fn errors_read_as_the_readme_shows() {
        let readme = include_str!("../../README.md");
        let section = readme
            .split("\n## Configuration\n")
            .nth(1)
            .expect("the README has a Configuration section");
        let block = section
            .split("```text\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("its first text block shows the errors");
        let shown: Vec<&str> = block.lines().collect();
        // What `flotilla check` prints (`error: ` and the message), up to the quoted lines.
        let printed: Vec<String> = README_EXAMPLES
            .iter()
            .map(|text| {
                let error = crate::config::Config::parse(text, "flotilla.yaml".as_ref())
                    .expect_err("an invalid config");
                let message = error.to_string();
                format!("error: {}", message.lines().next().unwrap_or_default())
            })
            .collect();
        assert_eq!(shown, printed);
    }

    #[test]
    fn every_error_names_the_file_and_where_in_it() {
        let gone = std::io::Error::from(std::io::ErrorKind::NotFound);
        for (error, message) in [
            (
                ConfigError::Read {
                    path: "/etc/flotilla.yaml".into(),
                    error: gone,
                },
                "/etc/flotilla.yaml: cannot read: entity not found",
            ),
            (
                ConfigError::Yaml {
                    path: "flotilla.yaml".into(),
                    key: Some("concurrency".into()),
                    error: yaml(Some((2, 14)), Some(" --> <input>:2:14")),
                },
                "flotilla.yaml: line 2 column 14: concurrency: invalid u16\n --> <input>:2:14",
            ),
            (
                ConfigError::Yaml {
                    path: "flotilla.yaml".into(),
                    key: None,
                    error: yaml(Some((1, 1)), None),
                },
                "flotilla.yaml: line 1 column 1: invalid u16",
            ),
            (
                ConfigError::Yaml {
                    path: "flotilla.yaml".into(),
                    key: None,
                    error: yaml(None, None),
                },
                "flotilla.yaml: invalid u16",
            ),
            (
                invalid(
                    "selector",
                    Some(1),
                    ConfigProblem::Selector(InvalidSelector {
                        selector: "env in (a".into(),
                        error: SelectorError::UnclosedParen,
                    }),
                ),
                r#"flotilla.yaml: line 1: selector: invalid label selector "env in (a": unbalanced '('"#,
            ),
            (
                invalid(
                    "templates",
                    None,
                    ConfigProblem::NotADirectory("/x/templates".into()),
                ),
                "flotilla.yaml: templates: /x/templates is not a directory",
            ),
            (
                invalid("instance", Some(3), ConfigProblem::Empty),
                "flotilla.yaml: line 3: instance: must not be empty",
            ),
            (
                invalid(
                    "instance",
                    Some(3),
                    ConfigProblem::Label(LabelError::Value("a b".into())),
                ),
                r#"flotilla.yaml: line 3: instance: label value "a b": must be at most 63 characters of [A-Za-z0-9._-], starting and ending alphanumeric"#,
            ),
            (
                invalid(
                    "namespace",
                    Some(1),
                    ConfigProblem::NamespaceName("Flotilla_System".into()),
                ),
                r#"flotilla.yaml: line 1: namespace: "Flotilla_System" is not a valid namespace name (lowercase alphanumerics and '-', at most 63)"#,
            ),
            (
                invalid(
                    "fieldManager",
                    Some(1),
                    ConfigProblem::Length { min: 1, max: 128 },
                ),
                "flotilla.yaml: line 1: fieldManager: must be 1-128 characters",
            ),
            (
                invalid(
                    "leaderElection.leaseDurationSeconds",
                    Some(2),
                    ConfigProblem::AtLeast(3),
                ),
                "flotilla.yaml: line 2: leaderElection.leaseDurationSeconds: must be at least 3",
            ),
            (
                invalid(
                    "policy.allowNamespaces",
                    Some(2),
                    ConfigProblem::NotReserved("team-a".into()),
                ),
                "flotilla.yaml: line 2: policy.allowNamespaces: \"team-a\" is not a reserved namespace (kube-system, kube-public, kube-node-lease): a namespace the selector matches is a target already",
            ),
            (
                invalid(
                    "policy.allowNamespaces",
                    Some(2),
                    ConfigProblem::OwnNamespaceAllowed("flotilla-system".into()),
                ),
                "flotilla.yaml: line 2: policy.allowNamespaces: \"flotilla-system\" is flotilla's own namespace, which holds its credentials: it is never a target",
            ),
            (
                invalid(
                    "overrides.registry",
                    Some(3),
                    ConfigProblem::Override(OverrideError::NoSuchValue("registry".into())),
                ),
                "flotilla.yaml: line 3: overrides.registry: there is no values.registry to override",
            ),
        ] {
            assert_eq!(error.to_string(), message);
            assert!(std::error::Error::source(&error).is_none(), "{message}");
        }
    }
}
