//! serde-saphyr's error, taken apart once for both readers of YAML (the config file, rendered
//! templates): where the parser stopped, why, and the source lines it quotes around the spot.

use serde_saphyr::{DefaultMessageFormatter, Localizer, Location, SnippetMode};
use std::borrow::Cow;

#[derive(Debug, Clone, PartialEq)]
pub struct YamlError {
    /// 1-based, where the parser knows it.
    pub position: Option<Position>,
    /// The parser's reason alone, without its position (control characters escaped).
    pub reason: String,
    /// The lines around the spot, numbered, with a caret under it, as the parser draws them;
    /// `None` when it drew none. They quote the source: show them only where the source is
    /// the reader's own (the config file), never rendered output.
    pub quoted_lines: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Position {
    pub line: usize,
    pub column: usize,
}

impl From<serde_saphyr::Error> for YamlError {
    fn from(error: serde_saphyr::Error) -> YamlError {
        let position = error.location().filter(|l| l.line() > 0).map(|l| Position {
            line: l.line() as usize,
            column: l.column() as usize,
        });
        let formatter = DefaultMessageFormatter.with_localizer(&WithoutPosition);
        let reason = error.render_with_options(serde_saphyr::render_options! {
            formatter: &formatter,
            snippets: SnippetMode::Off,
        });
        // The drawing comes only with the whole rendering, below its title line (the position
        // and the reason, which are taken above from the error itself).
        let quoted_lines = error
            .to_string()
            .split_once('\n')
            .map(|(_title, lines)| lines.to_string());
        YamlError {
            position,
            reason,
            quoted_lines,
        }
    }
}

/// Words the parser's messages without the position it would append ("at line 3, column 6"):
/// flotilla places the position itself.
struct WithoutPosition;

impl Localizer for WithoutPosition {
    fn attach_location<'a>(&self, base: Cow<'a, str>, _: Location) -> Cow<'a, str> {
        base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> YamlError {
        serde_saphyr::from_str::<serde_json::Value>(text)
            .expect_err(text)
            .into()
    }

    #[test]
    fn takes_position_reason_and_quoted_lines_apart() {
        let error = parse("a: 1\nb:\n  c: [1, 2\n");
        assert_eq!(
            error,
            YamlError {
                position: Some(Position { line: 3, column: 6 }),
                reason: "unclosed bracket '['".into(),
                quoted_lines: Some(
                    [
                        " --> <input>:3:6",
                        "  |",
                        "1 | a: 1",
                        "2 | b:",
                        "3 |   c: [1, 2",
                        "  |      ^ unclosed bracket '['",
                    ]
                    .join("\n")
                ),
            }
        );
    }

    #[test]
    fn reasons_carry_no_position_and_no_raw_control_characters() {
        for (text, position, reason) in [
            ("a: [1\n", (1, 4), "unclosed bracket '['"),
            (
                "a: 1\na: 2\n",
                (2, 1),
                "duplicate mapping key: a, set DuplicateKeyPolicy in Options if acceptable",
            ),
            ("a: \"\u{1b}\"\n", (1, 5), "unexpected character: `\\u{1b}'"),
            (
                "a: b: c\n",
                (1, 5),
                "mapping values are not allowed in this context",
            ),
        ] {
            let error = parse(text);
            let (line, column) = position;
            assert_eq!(
                (error.position, error.reason.as_str()),
                (Some(Position { line, column }), reason),
                "{text:?}"
            );
        }
    }

    #[test]
    fn a_type_error_is_placed_at_the_value() {
        let error: YamlError = serde_saphyr::from_str::<Vec<u16>>("- 1\n- many\n")
            .unwrap_err()
            .into();
        assert_eq!(error.position, Some(Position { line: 2, column: 3 }));
        assert_eq!(error.reason, "invalid u16");
    }
}
