//! A page of the docs read as the examples test sees it: its fenced code blocks, and the
//! `<!-- doctest:... -->` comments that say how to run them (invisible where the markdown is
//! rendered). Blocks inside list items and block quotes are read with their indentation or
//! `> ` taken off, as a reader sees them.

/// One thing on a page the test acts on, in page order.
#[derive(Debug)]
pub(crate) enum Item {
    /// `<!-- doctest:KIND ARG` on its first line, then an optional body, then `-->`.
    Directive {
        kind: String,
        arg: String,
        body: String,
        line: usize,
    },
    /// A fenced code block: its info string's first word, its text, the line its text
    /// starts on, and what precedes each of its lines (indentation, `> `).
    Block {
        lang: String,
        text: String,
        line: usize,
        prefix: String,
    },
}

/// What precedes a line's text: indentation and block-quote markers.
fn prefix_len(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '>']).len()
}

/// `line` without the `prefix` it shares with the line that opened its block.
fn strip<'a>(line: &'a str, prefix: &str) -> &'a str {
    line.strip_prefix(prefix)
        .unwrap_or_else(|| line.trim_start_matches([' ', '>']))
}

pub(crate) fn parse(page: &str) -> Vec<Item> {
    let lines: Vec<&str> = page.lines().collect();
    let mut items = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let prefix = &lines[i][..prefix_len(lines[i])];
        let text = &lines[i][prefix.len()..];
        if let Some(rest) = text.strip_prefix("```") {
            let lang = rest.split([' ', ',']).next().unwrap_or("").to_string();
            let start = i + 1;
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && !strip(lines[i], prefix).starts_with("```") {
                body.push(strip(lines[i], prefix));
                i += 1;
            }
            assert!(
                i < lines.len(),
                "line {start}: a code block that never closes"
            );
            items.push(Item::Block {
                lang,
                text: body.iter().map(|l| format!("{l}\n")).collect(),
                line: start + 1,
                prefix: prefix.to_string(),
            });
        } else if let Some(rest) = text.strip_prefix("<!-- doctest:") {
            let line = i + 1;
            let (first, closed) = match rest.strip_suffix("-->") {
                Some(first) => (first.trim_end(), true),
                None => (rest, false),
            };
            let (kind, arg) = first.split_once(' ').unwrap_or((first, ""));
            let mut body = String::new();
            if !closed {
                i += 1;
                while i < lines.len() && strip(lines[i], prefix).trim_end() != "-->" {
                    body.push_str(strip(lines[i], prefix));
                    body.push('\n');
                    i += 1;
                }
                assert!(
                    i < lines.len(),
                    "line {line}: a doctest comment that never closes"
                );
            }
            items.push(Item::Directive {
                kind: kind.to_string(),
                arg: arg.trim().to_string(),
                body,
                line,
            });
        } else if text.contains("<!-- doctest") {
            panic!("line {}: a doctest comment must start its line", i + 1);
        }
        i += 1;
    }
    items
}
