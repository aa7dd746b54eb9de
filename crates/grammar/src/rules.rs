//! The compiled form of a grammar: llama.cpp's grammar elements (`llama_grammar_element`), the
//! rules as one flat array of them, and the predicates on an element that the parser, the matcher
//! and the printer share.
//!
//! A rule is a run of elements ending in [`Kind::End`]; its alternates are separated by
//! [`Kind::Alt`]. A character class is a [`Kind::Char`] (or [`Kind::CharNot`]) followed by any
//! number of [`Kind::CharAlt`] and [`Kind::CharRngUpper`] elements (a range's upper bound follows
//! its lower one). A position in the grammar is an index into the flat array ([`Pos`]).

use std::fmt;

/// What an element is (llama.cpp's `llama_gretype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// End of a rule definition.
    End,
    /// Start of an alternate definition of the rule.
    Alt,
    /// A reference to a rule (the value is its id).
    RuleRef,
    /// A character (the value is its code point), or the start of a character class.
    Char,
    /// The start of an inverse character class (`[^...]`).
    CharNot,
    /// The upper bound of an inclusive range (`[a-z]`): the previous element is its lower bound.
    CharRngUpper,
    /// One more character or range start in the current class.
    CharAlt,
    /// Any character (`.`).
    CharAny,
    /// A token by id (`<[id]>` or `<text>`).
    Token,
    /// Any token but this id (`!<[id]>`).
    TokenNot,
}

/// One grammar element: its kind and value (a code point, a rule id or a token id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Elem {
    /// The kind.
    pub kind: Kind,
    /// The code point, rule id or token id (0 where the kind has none).
    pub value: u32,
}

impl Elem {
    pub(crate) const fn new(kind: Kind, value: u32) -> Self {
        Self { kind, value }
    }

    /// Whether this element ends an alternate (llama.cpp's `llama_grammar_is_end_of_sequence`).
    pub fn ends_sequence(&self) -> bool {
        matches!(self.kind, Kind::End | Kind::Alt)
    }

    /// Whether the element is part of a character class.
    pub fn is_char(&self) -> bool {
        matches!(self.kind, Kind::Char | Kind::CharNot | Kind::CharAlt | Kind::CharRngUpper | Kind::CharAny)
    }

    /// Whether the element matches a token id.
    pub fn is_token(&self) -> bool {
        matches!(self.kind, Kind::Token | Kind::TokenNot)
    }
}

/// A position: an index into [`Rules::elems`].
pub type Pos = u32;

/// The rules of a grammar, flattened: rule `i`'s elements start at `starts[i]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    pub(crate) elems: Vec<Elem>,
    pub(crate) starts: Vec<Pos>,
    pub(crate) names: Vec<String>,
}

impl Rules {
    /// Flattens `rules` (each ends with [`Kind::End`]) named `names` (by rule id).
    pub(crate) fn new(rules: &[Vec<Elem>], names: Vec<String>) -> Self {
        let mut elems = Vec::with_capacity(rules.iter().map(Vec::len).sum());
        let mut starts = Vec::with_capacity(rules.len());
        for r in rules {
            starts.push(elems.len() as Pos);
            elems.extend_from_slice(r);
        }
        Self { elems, starts, names }
    }

    /// The number of rules.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Rule `id`'s elements, its `End` included.
    pub fn rule(&self, id: usize) -> &[Elem] {
        let start = self.starts[id] as usize;
        let end =
            self.elems[start..].iter().position(|e| e.kind == Kind::End).map_or(self.elems.len(), |p| start + p + 1);
        &self.elems[start..end]
    }

    /// The name of rule `id` (generated names are the parent's name, `_` and the id, as
    /// llama.cpp names them).
    pub fn name(&self, id: usize) -> &str {
        &self.names[id]
    }

    /// The id of the rule named `name`.
    pub fn id(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// The element at `pos`.
    #[inline]
    pub(crate) fn at(&self, pos: Pos) -> Elem {
        self.elems[pos as usize]
    }

    /// The first position of rule `id`.
    #[inline]
    pub(crate) fn start(&self, id: u32) -> Pos {
        self.starts[id as usize]
    }
}

fn write_char(f: &mut fmt::Formatter<'_>, c: u32) -> fmt::Result {
    if (0x20..=0x7f).contains(&c) { write!(f, "{}", c as u8 as char) } else { write!(f, "<U+{c:04X}>") }
}

/// Prints the rules as llama.cpp's `llama_grammar_parser::print` does, one rule a line.
impl fmt::Display for Rules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for id in 0..self.len() {
            let rule = self.rule(id);
            write!(f, "{} ::= ", self.name(id))?;
            for (i, e) in rule[..rule.len() - 1].iter().enumerate() {
                match e.kind {
                    Kind::End => {}
                    Kind::Alt => write!(f, "| ")?,
                    Kind::RuleRef => write!(f, "{} ", self.name(e.value as usize))?,
                    Kind::Char => {
                        write!(f, "[")?;
                        write_char(f, e.value)?;
                    }
                    Kind::CharNot => {
                        write!(f, "[^")?;
                        write_char(f, e.value)?;
                    }
                    Kind::CharRngUpper => {
                        write!(f, "-")?;
                        write_char(f, e.value)?;
                    }
                    Kind::CharAlt => write_char(f, e.value)?,
                    Kind::CharAny => write!(f, ".")?,
                    Kind::Token => write!(f, "<[{}]> ", e.value)?,
                    Kind::TokenNot => write!(f, "!<[{}]> ", e.value)?,
                }
                if e.is_char() && !matches!(rule[i + 1].kind, Kind::CharAlt | Kind::CharRngUpper | Kind::CharAny) {
                    write!(f, "] ")?;
                }
            }
            writeln!(f)?;
        }
        Ok(())
    }
}
