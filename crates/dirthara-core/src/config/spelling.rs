//! The name a typo most likely meant: what a refusal of an unknown setting, variable, key or
//! fleet target offers (`did you mean ...?`).

/// The known name most like `unknown` among `known`, if one is close enough to be what was
/// meant (a typo, a letter case, a missing or doubled letter).
pub fn nearest<'a>(unknown: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let unknown = unknown.to_ascii_lowercase();
    known
        .into_iter()
        .map(|name| (edit_distance(&unknown, &name.to_ascii_lowercase()), name))
        .filter(|&(distance, name)| distance <= (name.len() / 3).max(2))
        .min_by_key(|&(distance, _)| distance)
        .map(|(_, name)| name)
}

/// Levenshtein distance, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_distance_is_levenshteins_and_the_nearest_is_close_enough() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(
            nearest("lock_wiat", ["lock_wait", "lock_ttl"]),
            Some("lock_wait")
        );
        assert_eq!(nearest("colour", ["lock_wait"]), None);
    }
}
