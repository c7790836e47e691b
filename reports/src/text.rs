//! Text from a file (a history, a scenario, a node's output) on its way to a terminal or a
//! report: control characters escaped, length bounded, lists bounded.

/// The most characters of a file's text quoted in one place.
pub const QUOTE_MAX: usize = 240;

/// The most reasons (inconclusive causes, unreadable lines) kept in a result; the rest counted.
pub const REASONS_MAX: usize = 20;

/// `text` made safe to print: control characters (terminal escape sequences among them) and the
/// invisible direction and format characters that reorder or hide what a reader sees (U+202E
/// right-to-left override, U+2066 isolates, U+200B zero width space, ...) shown escaped
/// (`\u{1b}`, `\u{202e}`), and cut after [`QUOTE_MAX`] characters, saying how much was left out.
#[must_use]
pub fn printable(text: &str) -> String {
    cut(text, QUOTE_MAX)
}

/// The most characters of one reason or sentence kept (it quotes at most [`QUOTE_MAX`] of a file).
const REASON_MAX: usize = 1_000;

/// A sentence or a reason made safe to print: control characters escaped, at most a thousand
/// characters (a quote of a raw line is [`printable`], shorter).
#[must_use]
pub fn escaped(text: &str) -> String {
    cut(text, REASON_MAX)
}

fn cut(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max + 32));
    for (shown, (i, c)) in text.char_indices().enumerate() {
        if shown == max {
            out.push_str(&format!("... ({} more bytes)", text.len() - i));
            break;
        }
        if c.is_control() || invisible(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Characters that change how text around them is shown without being seen themselves: the
/// bidirectional overrides, embeddings, isolates and marks, zero-width characters, the BOM.
fn invisible(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}' | '\u{061C}')
}

/// `text` for Markdown (summary.md): [`escaped`], and the characters Markdown or the HTML it
/// renders to would read as markup (`<`, `>`, `&`, backticks, `*`, `_`, `[`, `]`, `|`, `\`)
/// escaped with a backslash or as entities, so a node's or a file's text shows as written.
#[must_use]
pub fn markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for c in escaped(&text.replace(['\n', '\r'], " ")).chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '`' | '*' | '[' | ']' | '|' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// Keeps the first [`REASONS_MAX`] of `reasons`, each printable (control characters escaped, at
/// most a thousand characters), and says how many more there were.
#[must_use]
pub fn bounded(reasons: Vec<String>) -> Vec<String> {
    let more = reasons.len().saturating_sub(REASONS_MAX);
    let mut kept: Vec<String> = reasons.into_iter().take(REASONS_MAX).map(|r| cut(&r, REASON_MAX)).collect();
    if more > 0 {
        kept.push(format!("... and {more} more"));
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_shown_escaped_and_long_text_is_cut() {
        assert_eq!(printable("a\u{1b}[31mred\nb"), "a\\u{1b}[31mred\\nb");
        let long = "x".repeat(QUOTE_MAX + 10);
        let p = printable(&long);
        assert!(p.starts_with(&"x".repeat(QUOTE_MAX)) && p.ends_with("... (10 more bytes)"), "{p}");
        assert_eq!(printable("plain"), "plain");
    }

    #[test]
    fn direction_overrides_and_invisible_characters_are_shown_escaped() {
        assert_eq!(printable("n1\u{202e}gnp.exe"), "n1\\u{202e}gnp.exe");
        assert_eq!(printable("a\u{2066}b\u{200b}c\u{feff}"), "a\\u{2066}b\\u{200b}c\\u{feff}");
        assert_eq!(printable("naïve ünïcode"), "naïve ünïcode", "letters stay letters");
    }

    #[test]
    fn markup_is_escaped_for_markdown() {
        assert_eq!(markdown("<img src=x onerror=1>"), "&lt;img src=x onerror=1&gt;");
        assert_eq!(markdown("```rust\n| a | b |"), "\\`\\`\\`rust \\| a \\| b \\|");
        assert_eq!(markdown("fence 7 < newest 8"), "fence 7 &lt; newest 8");
    }

    #[test]
    fn reasons_beyond_the_bound_are_counted_not_kept() {
        let many: Vec<String> = (0..REASONS_MAX + 5).map(|i| format!("r{i}")).collect();
        let kept = bounded(many);
        assert_eq!(kept.len(), REASONS_MAX + 1);
        assert_eq!(kept.last().map(String::as_str), Some("... and 5 more"));
        assert_eq!(bounded(vec!["one".into()]), vec!["one".to_owned()]);
    }
}
