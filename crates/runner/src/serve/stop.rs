//! Stop strings over a stream of text pieces: a stop may span token boundaries, so text that may
//! be the start of a stop string is held back until it is known not to be, and nothing after a
//! stop's start is ever emitted (OpenAI's `stop`, as llama-server applies it).

/// What one piece of text gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    /// Text now known not to belong to a stop string (possibly empty).
    Text(String),
    /// A stop string was found: the text before it, not emitted yet; nothing follows.
    Stop(String),
}

/// Holds back what may be the start of a stop string.
#[derive(Debug, Clone, Default)]
pub struct StopFilter {
    stops: Vec<String>,
    pending: String,
    matched: Option<String>,
}

impl StopFilter {
    /// A filter for `stops` (empty strings are ignored).
    pub fn new(stops: &[String]) -> Self {
        StopFilter {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            pending: String::new(),
            matched: None,
        }
    }

    /// Adds `piece` of the output.
    pub fn push(&mut self, piece: &str) -> Pushed {
        self.pending.push_str(piece);
        // The earliest stop in the pending text (pending never holds a complete stop).
        let found =
            self.stops.iter().filter_map(|s| self.pending.find(s.as_str()).map(|at| (at, s))).min_by_key(|f| f.0);
        if let Some((at, word)) = found {
            let before = self.pending[..at].to_string();
            self.matched = Some(word.clone());
            self.pending.clear();
            return Pushed::Stop(before);
        }
        // Hold back the longest suffix that is a proper prefix of a stop string.
        let mut keep = 0;
        for s in &self.stops {
            for (i, _) in s.char_indices().skip(1) {
                if i > keep && self.pending.ends_with(&s[..i]) {
                    keep = i;
                }
            }
        }
        let cut = self.pending.len() - keep;
        let out = self.pending[..cut].to_string();
        self.pending.drain(..cut);
        Pushed::Text(out)
    }

    /// The stop string found (llama-server's `stopping_word`), once [`Pushed::Stop`] came.
    pub fn matched(&self) -> Option<&str> {
        self.matched.as_deref()
    }

    /// The text held back, at the end of the output (no stop came).
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stops(s: &[&str]) -> StopFilter {
        StopFilter::new(&s.iter().map(|x| x.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn a_stop_across_pieces_is_held_back_then_cut() {
        let mut f = stops(&["</end>"]);
        assert_eq!(f.push("hello <"), Pushed::Text("hello ".into()));
        assert_eq!(f.push("/en"), Pushed::Text(String::new()));
        assert_eq!(f.matched(), None);
        assert_eq!(f.push("d> and more"), Pushed::Stop(String::new()));
        assert_eq!(f.matched(), Some("</end>"));
    }

    #[test]
    fn held_text_that_is_no_stop_is_released() {
        let mut f = stops(&["ab", "xyz"]);
        assert_eq!(f.push("1a"), Pushed::Text("1".into()));
        assert_eq!(f.push("c"), Pushed::Text("ac".into()));
        assert_eq!(f.push("xy"), Pushed::Text(String::new()));
        assert_eq!(f.finish(), "xy");
    }

    #[test]
    fn the_earliest_stop_wins_and_text_before_it_comes_out() {
        let mut f = stops(&["world", "lo"]);
        assert_eq!(f.push("hello world"), Pushed::Stop("hel".into()));
        assert_eq!(f.matched(), Some("lo"), "the earliest, not the first listed");
        let mut f = stops(&["\n\n"]);
        assert_eq!(f.push("a\n"), Pushed::Text("a".into()));
        assert_eq!(f.push("\nb"), Pushed::Stop(String::new()));
    }

    #[test]
    fn multibyte_prefixes_are_cut_on_char_boundaries() {
        let mut f = stops(&["éé"]);
        assert_eq!(f.push("aé"), Pushed::Text("a".into()));
        assert_eq!(f.push("b"), Pushed::Text("éb".into()));
        let mut none = stops(&[""]);
        assert_eq!(none.push("text"), Pushed::Text("text".into()));
    }
}
