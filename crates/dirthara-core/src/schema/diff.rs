//! The lines that differ between two texts of one object, as a unified diff's hunks: `-` for
//! a line only the first has, `+` for one only the second has, three lines of context.
//!
//! An object's text is small (a table, a view, a function), so a longest common subsequence
//! over its lines is cheap; past [`MAX_CELLS`] the whole text is shown replaced, so a huge
//! object never costs more than that.

/// The most cells of the comparison table: 4 M bytes for two texts of 2,000 lines.
const MAX_CELLS: usize = 4_000_000;

const CONTEXT: usize = 3;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Edit {
    Same,
    Removed,
    Added,
}

/// The unified-diff hunks that turn `old` into `new`; empty when they are equal.
pub fn line_diff(old: &str, new: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let edits = edits(&a, &b);
    let mut out = String::new();
    let mut start = 0;
    while let Some(first) = (start..edits.len()).find(|&i| edits[i].0 != Edit::Same) {
        // The hunk runs until the changes are more than two contexts apart.
        let mut end = first;
        let mut i = first;
        while i < edits.len() {
            if edits[i].0 != Edit::Same {
                end = i;
            } else if i - end > 2 * CONTEXT {
                break;
            }
            i += 1;
        }
        let from = first.saturating_sub(CONTEXT).max(start);
        let to = (end + CONTEXT + 1).min(edits.len());
        let hunk = &edits[from..to];
        let (old_start, new_start) = (edits[from].1, edits[from].2);
        let old_len = hunk.iter().filter(|e| e.0 != Edit::Added).count();
        let new_len = hunk.iter().filter(|e| e.0 != Edit::Removed).count();
        out.push_str(&format!(
            "@@ -{},{old_len} +{},{new_len} @@\n",
            old_start + usize::from(old_len > 0),
            new_start + usize::from(new_len > 0)
        ));
        for &(edit, old_index, new_index) in hunk {
            let (mark, line) = match edit {
                Edit::Same => (' ', a[old_index]),
                Edit::Removed => ('-', a[old_index]),
                Edit::Added => ('+', b[new_index]),
            };
            out.push(mark);
            out.push_str(line);
            out.push('\n');
        }
        start = to;
    }
    out
}

/// Each line's edit, with the index of the line in `a` and in `b` it stands at (for a line
/// of one side only, the other index is where the other side is at that point).
fn edits(a: &[&str], b: &[&str]) -> Vec<(Edit, usize, usize)> {
    let (n, m) = (a.len(), b.len());
    let mut out = Vec::with_capacity(n + m);
    if (n + 1).saturating_mul(m + 1) > MAX_CELLS {
        out.extend((0..n).map(|i| (Edit::Removed, i, 0)));
        out.extend((0..m).map(|j| (Edit::Added, n, j)));
        return out;
    }
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let width = m + 1;
    let mut lcs = vec![0u32; (n + 1) * width];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i * width + j] = if a[i] == b[j] {
                lcs[(i + 1) * width + j + 1] + 1
            } else {
                lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push((Edit::Same, i, j));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[(i + 1) * width + j] >= lcs[i * width + j + 1]) {
            // Removals before additions where either would do, as `diff -u` shows them.
            out.push((Edit::Removed, i, j));
            i += 1;
        } else {
            out.push((Edit::Added, i, j));
            j += 1;
        }
    }
    out
}
