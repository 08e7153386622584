//! Shortening text that comes from outside (a holder's statement, a host name) for a
//! message or a session name, without ever splitting a character.
//!
//! `String::truncate(n)` and `&s[..n]` panic when byte `n` falls inside a multi-byte
//! character: a waiter reporting a holder busy with `SELECT 'é…'` crashed that way. Every
//! cut of such text goes through here.

/// The longest prefix of `text` that is at most `max_bytes` long and ends on a character
/// boundary (so possibly shorter than `max_bytes`, never longer).
pub(crate) fn cut_at_char_boundary(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    // A UTF-8 character is at most 4 bytes: a boundary is at most 3 bytes back.
    let end = (0..=max_bytes)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    &text[..end]
}

/// Cuts `text` in place to at most `max_bytes`, between characters.
pub fn truncate_at_char_boundary(text: &mut String, max_bytes: usize) {
    let keep = cut_at_char_boundary(text, max_bytes).len();
    text.truncate(keep);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_cut_inside_a_character_moves_back_to_its_start() {
        // `é` is 2 bytes, `語` 3, `🦀` 4.
        assert_eq!(cut_at_char_boundary("aé", 2), "a");
        assert_eq!(cut_at_char_boundary("aé", 3), "aé");
        assert_eq!(cut_at_char_boundary("語語", 4), "語");
        assert_eq!(cut_at_char_boundary("語語", 5), "語");
        assert_eq!(cut_at_char_boundary("🦀x", 3), "");
        assert_eq!(cut_at_char_boundary("🦀x", 4), "🦀");
        assert_eq!(cut_at_char_boundary("", 0), "");
        assert_eq!(cut_at_char_boundary("abc", 0), "");
        let mut s = String::from("SELECT SLEEP(6), 'aéééé'");
        truncate_at_char_boundary(&mut s, 19);
        assert_eq!(s, "SELECT SLEEP(6), 'a");
        truncate_at_char_boundary(&mut s, 100);
        assert_eq!(s, "SELECT SLEEP(6), 'a");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn a_cut_never_panics_and_is_the_longest_prefix_within_the_limit(
            text in "(\\PC|[éü語🦀])*",
            max in 0usize..64,
        ) {
            let cut = cut_at_char_boundary(&text, max);
            prop_assert!(text.starts_with(cut));
            prop_assert!(cut.len() <= max);
            // The longest such prefix: one more character would pass the limit.
            if let Some(next) = text[cut.len()..].chars().next() {
                prop_assert!(cut.len() + next.len_utf8() > max);
            }
            let mut owned = text.clone();
            truncate_at_char_boundary(&mut owned, max);
            prop_assert_eq!(owned.as_str(), cut);
        }
    }
}
