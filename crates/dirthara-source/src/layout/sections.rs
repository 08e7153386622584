//! The sections of a dbmate or goose file: its up and down texts, where each is in the
//! file, and what the file's markers say about them.

use std::ops::Range;

/// The up and down texts of a sectioned file, and where each is in the file.
pub(crate) struct Sections {
    pub up: String,
    pub down: Option<String>,
    pub up_no_transaction: bool,
    pub down_no_transaction: bool,
    /// (first line, lines left out) of each section's text in the file.
    pub up_lines: (usize, Vec<usize>),
    pub down_lines: (usize, Vec<usize>),
    /// The byte ranges of each section's text under goose's `ENVSUB ON`.
    pub up_envsub: Vec<Range<usize>>,
    pub down_envsub: Vec<Range<usize>>,
}

/// Lines with the byte offset just after each (its `\n` included).
fn lines_with_ends(text: &str) -> impl Iterator<Item = (&str, usize, usize)> {
    let mut start = 0;
    text.split_inclusive('\n').map(move |line| {
        let begin = start;
        start += line.len();
        (line.trim_end_matches(['\n', '\r']), begin, start)
    })
}

/// dbmate: `-- migrate:up [transaction:false]` then `-- migrate:down [transaction:false]`.
/// The up text is exactly the lines between the markers, so its checksum is that of the
/// same text in a plain `.up.sql` file. `None`: not a dbmate file.
pub(crate) fn dbmate_sections(text: &str) -> Option<Result<Sections, String>> {
    let mut up: Option<(usize, bool)> = None;
    let mut down: Option<(usize, usize, bool)> = None;
    let (mut up_line, mut down_line) = (1, 1);
    for (number, (line, begin, end)) in lines_with_ends(text).enumerate() {
        let Some(rest) = line.trim_end().strip_prefix("-- migrate:") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let which = words.next().unwrap_or_default();
        let mut no_transaction = false;
        for option in words {
            match option {
                "transaction:false" => no_transaction = true,
                "transaction:true" => {}
                other => return Some(Err(format!("unknown dbmate option `{other}` on `{line}`; dirthara knows `transaction:false`"))),
            }
        }
        match which {
            "up" if up.is_none() && down.is_none() => {
                up = Some((end, no_transaction));
                up_line = number + 2;
            }
            "down" if up.is_some() && down.is_none() => {
                down = Some((begin, end, no_transaction));
                down_line = number + 2;
            }
            _ => return Some(Err(format!("unexpected `{line}`: a dbmate file has one `-- migrate:up` section, then at most one `-- migrate:down`"))),
        }
    }
    if up.is_none() && down.is_none() {
        return None;
    }
    let (up_start, up_no_tx) = up?;
    let up_end = down.map_or(text.len(), |d| d.0);
    Some(Ok(Sections {
        up: text[up_start..up_end].to_string(),
        down: down.map(|d| text[d.1..].to_string()),
        up_no_transaction: up_no_tx,
        down_no_transaction: down.is_some_and(|d| d.2),
        up_lines: (up_line, Vec::new()),
        down_lines: (down_line, Vec::new()),
        up_envsub: Vec::new(),
        down_envsub: Vec::new(),
    }))
}

/// goose: `-- +goose Up` / `-- +goose Down` (any case), `-- +goose NO TRANSACTION`,
/// `-- +goose ENVSUB ON` / `OFF` (the lines between are kept as regions of the section's text:
/// [`crate::placeholders::envsub`]). `StatementBegin`/`StatementEnd` lines are dropped: they
/// only told goose's splitter to keep a routine body whole, which dirthara's tokenizer does
/// on its own.
pub(crate) fn goose_sections(text: &str) -> Option<Result<Sections, String>> {
    let mut up: Option<String> = None;
    let mut down: Option<String> = None;
    let mut no_transaction = false;
    let mut envsub = false;
    let (mut up_envsub, mut down_envsub) = (Vec::new(), Vec::new());
    let mut seen = false;
    let (mut up_lines, mut down_lines) = ((1, Vec::new()), (1, Vec::new()));
    for (number, (line, begin, end)) in lines_with_ends(text).enumerate() {
        let number = number + 1;
        let annotation = line
            .get(..9)
            .filter(|p| p.eq_ignore_ascii_case("-- +goose"))
            .map(|_| {
                line[9..]
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
                    .to_ascii_lowercase()
            });
        // An annotation inside a section is a line of the file its text leaves out.
        if annotation.is_some() {
            match (&up, &down) {
                (_, Some(_)) => down_lines.1.push(number),
                (Some(_), None) => up_lines.1.push(number),
                (None, None) => {}
            }
        }
        match annotation.as_deref() {
            Some("up") if up.is_none() && down.is_none() => {
                up = Some(String::new());
                up_lines = (number + 1, Vec::new());
            }
            Some("down") if up.is_some() && down.is_none() => {
                down = Some(String::new());
                up_lines.1.pop(); // the Down marker ends the up section
                down_lines = (number + 1, Vec::new());
            }
            Some("no transaction") => no_transaction = true,
            Some("statementbegin" | "statementend") => {}
            Some("envsub on") => envsub = true,
            Some("envsub off") => envsub = false,
            Some(other) => return Some(Err(format!("unsupported or misplaced goose annotation `-- +goose {other}`; dirthara knows Up, Down, StatementBegin, StatementEnd, NO TRANSACTION and ENVSUB ON/OFF"))),
            None => {
                let (section, regions) = match (&mut up, &mut down) {
                    (_, Some(d)) => (d, &mut down_envsub),
                    (Some(u), None) => (u, &mut up_envsub),
                    (None, None) => continue,
                };
                let from = section.len();
                section.push_str(&text[begin..end]);
                if envsub {
                    extend_regions(regions, from..section.len());
                }
            }
        }
        seen |= annotation.is_some();
    }
    if !seen {
        return None;
    }
    let Some(up) = up else {
        return Some(Err(
            "a goose file without `-- +goose Up`; add it above the up statements".into(),
        ));
    };
    Some(Ok(Sections {
        up,
        down,
        up_no_transaction: no_transaction,
        down_no_transaction: no_transaction,
        up_lines,
        down_lines,
        up_envsub,
        down_envsub,
    }))
}

/// `regions` with `next` added, joined to the last region when they touch.
fn extend_regions(regions: &mut Vec<Range<usize>>, next: Range<usize>) {
    match regions.last_mut() {
        Some(last) if last.end == next.start => last.end = next.end,
        _ => regions.push(next),
    }
}
