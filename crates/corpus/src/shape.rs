//! The shape of a word: Lample et al.'s capitalisation classes, read by
//! the tagger's capitalisation feature and the QA reading cues.

/// Capitalisation classes (0 is padding).
pub const CAPS_CLASSES: usize = 6;

/// Lample et al.'s capitalisation feature: 1 no letters, 2 all lowercase,
/// 3 all uppercase, 4 first letter uppercase, 5 other mixes.
pub fn caps_class(word: &str) -> u32 {
    let letters: Vec<char> = word.chars().filter(|c| c.is_alphabetic()).collect();
    let cased: Vec<&char> = letters.iter().filter(|c| c.is_uppercase() || c.is_lowercase()).collect();
    if letters.is_empty() || cased.is_empty() {
        1
    } else if cased.iter().all(|c| c.is_lowercase()) {
        2
    } else if cased.iter().all(|c| c.is_uppercase()) {
        3
    } else if word.chars().find(|c| c.is_alphabetic()).is_some_and(char::is_uppercase)
        && cased.iter().skip(1).all(|c| c.is_lowercase())
    {
        4
    } else {
        5
    }
}
