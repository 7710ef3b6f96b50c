//! A small, deterministic token counter for the built-in model.
//!
//! It approximates a BPE tokenizer: every run of letters or digits counts one
//! token per four characters (rounded up), every other visible character one
//! token. Real counts of the text read and written, not a constant, so usage
//! figures and cost views behave as they would with a real model.

/// Number of tokens in `text`.
pub fn count(text: &str) -> u64 {
    let mut tokens = 0u64;
    let mut word_len = 0u64;
    for ch in text.chars() {
        if ch.is_alphanumeric() {
            word_len += 1;
        } else {
            tokens += word_len.div_ceil(4);
            word_len = 0;
            if !ch.is_whitespace() {
                tokens += 1;
            }
        }
    }
    tokens + word_len.div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn counts_words_and_punctuation() {
        assert_eq!(count(""), 0);
        assert_eq!(count("hello"), 2);
        assert_eq!(count("a b c"), 3);
        assert_eq!(count("(1 + 2)"), 5);
        assert_eq!(count("{\"a\": 1}"), 7);
    }
}
