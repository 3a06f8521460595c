//! Where in the config's YAML text a key is set, and which key a line sets: how an error is
//! given its line (from the key path of the check that failed) or its key (from the line the
//! YAML parser stopped at). Block style is followed by indentation; a key inside a flow mapping
//! (`image: {type: string, pattern: '('}`) gets the line of the nearest key that has one.

use crate::yaml_error::YamlError;

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

fn is_blank_or_comment(line: &str) -> bool {
    let content = line.trim_start();
    content.is_empty() || content.starts_with('#')
}

/// The 1-based line of a dotted key path, or of the deepest part of it that has a line of its
/// own. Keys may contain dots themselves (`overrides: {resources.limits.cpu: …}`), so at each
/// level the longest matching key wins.
pub fn line_of_key(text: &str, path: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let segments: Vec<&str> = path.split('.').collect();
    let (mut at, mut from, mut parent_indent) = (0, 0, None::<usize>);
    let mut found = None;
    while at < segments.len() {
        let mut matched = None;
        'lines: for (i, line) in lines.iter().enumerate().skip(from) {
            if is_blank_or_comment(line) {
                continue;
            }
            match parent_indent {
                Some(parent) if indent(line) <= parent => break,
                // A top-level key starts its line: an unset key is not found in `values`.
                None if indent(line) > 0 => continue,
                _ => {}
            }
            for end in (at + 1..=segments.len()).rev() {
                let key = segments[at..end].join(".");
                if sets(line.trim_start(), &key) {
                    matched = Some((i, indent(line), end));
                    break 'lines;
                }
            }
        }
        let Some((i, indent, end)) = matched else {
            break;
        };
        found = Some(i + 1);
        (at, from, parent_indent) = (end, i + 1, Some(indent));
    }
    found
}

/// Whether a line's content (indentation stripped) sets `key`, plain or quoted.
fn sets(content: &str, key: &str) -> bool {
    ["", "'", "\""]
        .iter()
        .any(|quote| content.starts_with(&format!("{quote}{key}{quote}:")))
}

/// The key set on 1-based `line`, or, for a list item or continuation line, the key it belongs
/// to (the nearest line above that is indented less).
fn key_at_line(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().take(line).collect();
    let mut limit = usize::MAX;
    for l in lines.iter().rev() {
        if is_blank_or_comment(l) || indent(l) >= limit {
            continue;
        }
        if let Some((key, _)) = l.trim_start().split_once(':') {
            let key = key.trim().trim_matches(['"', '\''].as_slice());
            if !key.is_empty() && !key.contains([' ', '[', '{']) {
                return Some(key.to_string());
            }
        }
        limit = indent(l);
    }
    None
}

/// The key to name with a YAML error: the one the line the parser stopped at sets or belongs
/// to, unless the parser's reason names it already ("unknown field `selectr`").
pub fn key_named_at(text: &str, error: &YamlError) -> Option<String> {
    let line = error.position?.line;
    key_at_line(text, line).filter(|key| !error.reason.contains(&format!("`{key}`")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml_error::Position;

    const TEXT: &str = "\
# flotilla
selector: 'a in (b'
values:
  n: 1
  list:
    - a
    - b

overrides:
  other: {}
  resources.limits.cpu:
    type: x
  image: {type: string, pattern: '('}
leaderElection: {leaseDurationSeconds: 1}
'a b': 1
\"c.d\": 2
";

    #[test]
    fn a_key_path_is_found_on_its_line() {
        for (path, line) in [
            ("selector", Some(2)),
            ("values", Some(3)),
            ("values.n", Some(4)),
            ("values.list", Some(5)),
            ("overrides.other", Some(10)),
            // A key with dots in it wins over a shorter one.
            ("overrides.resources.limits.cpu", Some(11)),
            ("overrides.resources.limits.cpu.type", Some(12)),
            // In a flow mapping: the line of the nearest key that has one.
            ("overrides.image.pattern", Some(13)),
            ("leaderElection.leaseDurationSeconds", Some(14)),
            // Quoted keys.
            ("a b", Some(15)),
            ("c.d", Some(16)),
            // Not set: the deepest part that is (and not the `n` of another mapping).
            ("overrides.n", Some(9)),
            ("n", None),
            ("list", None),
            ("templates", None),
            ("nothing.here", None),
        ] {
            assert_eq!(line_of_key(TEXT, path), line, "{path}");
        }
    }

    #[test]
    fn a_line_names_its_key_or_the_one_it_belongs_to() {
        for (line, key) in [
            (1, None),
            (2, Some("selector")),
            (4, Some("n")),
            (6, Some("list")),
            (7, Some("list")),
            (8, Some("list")),
            (12, Some("type")),
            (13, Some("image")),
            (14, Some("leaderElection")),
        ] {
            assert_eq!(key_at_line(TEXT, line).as_deref(), key, "line {line}");
        }
        assert_eq!(key_at_line("- a\n- b\n", 2), None);
        assert_eq!(key_at_line("'quoted': 1\n", 1).as_deref(), Some("quoted"));
    }

    #[test]
    fn a_yaml_error_names_the_key_unless_its_reason_does() {
        let error = |line, reason: &str| YamlError {
            position: Some(Position { line, column: 1 }),
            reason: reason.into(),
            quoted_lines: None,
        };
        let text = "selectr: a=b\nconcurrency: many\n";
        assert_eq!(
            key_named_at(text, &error(2, "invalid u16")).as_deref(),
            Some("concurrency")
        );
        assert_eq!(
            key_named_at(text, &error(1, "unknown field `selectr`")),
            None
        );
        let nowhere = YamlError {
            position: None,
            ..error(1, "x")
        };
        assert_eq!(key_named_at(text, &nowhere), None);
    }
}
