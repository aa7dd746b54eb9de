//! JSON Schema to GBNF grammar text, as llama.cpp's converter (`common/json-schema-to-grammar.cpp`)
//! writes it.
//!
//! This crate owns the conversion from a JSON schema to the text of a GBNF grammar whose `root`
//! rule matches the JSON documents the schema describes, with llama.cpp's rule names, rule order,
//! `space` rule and primitive rule texts, byte for byte, so that llama.cpp's test expectations
//! hold. It does not parse or run grammars (the `grammar` crate does) and does not validate
//! instances against schemas.
//!
//! # API
//!
//! - [`to_grammar`] converts a [`serde_json::Value`]. Object keys are read in the map's order
//!   (this crate turns on serde_json's `preserve_order`, so a value parsed from text keeps the
//!   text's order; the order of `properties` is the order of the keys in the output).
//! - [`to_grammar_str`] parses JSON text first; a parse error becomes [`SchemaError::Json`] with
//!   its line and column.
//! - [`SchemaError`] says what is wrong and names the place as a JSON pointer
//!   (`/properties/age/minimum`).
//!
//! ```
//! let grammar = schema::to_grammar_str(r#"{"type": "integer", "minimum": 1}"#).unwrap();
//! assert_eq!(
//!     grammar,
//!     "root ::= ([1-9] [0-9]{0,15}) space\nspace ::= | \" \" | \"\\n\"{1,2} [ \\t]{0,20}\n"
//! );
//! ```
//!
//! # What is supported
//!
//! As llama.cpp's converter, which picks one rule per schema, the first that applies:
//! - `$ref` to a JSON pointer in the same document (`#/$defs/...`, `#/definitions/...`, any
//!   `#/...`), recursion included; a rule `ref-<pointer>` per reference.
//! - `oneOf` / `anyOf` (alternatives; `oneOf` is not exclusive, as in llama.cpp), and a `type`
//!   list (the schema once per type).
//! - `const`, `enum` (any JSON values).
//! - Objects: `properties` (in the schema's order, required ones first), `required`,
//!   `additionalProperties` (`false` or absent: none; `true` or a schema: any other key).
//! - `allOf` of object components (direct components' properties required, those of an `anyOf`
//!   component optional) or of `enum` components (the shared values).
//! - Arrays: `items` (a schema) with `minItems` / `maxItems`; tuples from an array `items` or
//!   `prefixItems` (all items, in order). As in llama.cpp, a `prefixItems` that is a schema
//!   stands for the schema of every item.
//! - Strings: `pattern` (a fully anchored `^...$` regular expression made of literal characters,
//!   the escapes `\.` `\*` ... (of `^$.[]()|{}*+?`), `\t` `\n` `\r` `\\` `\"` `\-` `\xHH`
//!   `\uHHHH`, `.`, `[...]` classes, `(...)` and `(?:...)` groups, `|`, `*`, `+`, `?`, `{m}`,
//!   `{m,}`, `{,n}`, `{m,n}`, and the lazy `*?` / `??`), `minLength` / `maxLength`, `format`
//!   `date`, `time`, `date-time`, `uuid` (and `uuid1` to `uuid5`).
//! - Integers: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`, with llama.cpp's
//!   digit-by-digit range construction.
//! - Types alone: `string`, `number`, `integer`, `boolean`, `null`, `object`, `array`; the empty
//!   schema `{}` is any object (as in llama.cpp), a schema with only annotations any value.
//!
//! Pure annotations (`title`, `description`, `$schema`, `$id`, `$comment`, `examples`,
//! `default`, `deprecated`, `readOnly`, `writeOnly`, `$defs`, `definitions`, `$anchor`, the
//! `content*` keywords) are ignored, as are keywords JSON Schema does not define (the
//! specification gives them no effect).
//!
//! # Deliberate differences from llama.cpp
//!
//! llama.cpp's converter ignores, without a word, keywords it does not handle; its grammar then
//! admits documents the schema rejects. Here every keyword that constrains the instance must be
//! applied by the rule chosen for its schema, or constrain only types that rule never produces
//! (`minLength` next to `"type": "integer"` constrains nothing); else the conversion fails with
//! [`SchemaError::Unsupported`]. So these are errors here:
//! - keywords never applied: `not`, `if` / `then` / `else`, `multipleOf`, `uniqueItems: true`,
//!   `contains` (and `minContains` / `maxContains`), `patternProperties`, `propertyNames`,
//!   `minProperties` above 0, `maxProperties`, `dependentRequired`, `dependentSchemas`,
//!   `dependencies`, `unevaluatedItems`, `unevaluatedProperties`, `$dynamicRef`,
//!   `$recursiveRef`;
//! - keywords the chosen rule skips: anything next to `$ref`, `anyOf` / `oneOf`, `const` or
//!   `enum` (a `type` there is accepted when the rule produces only those types); `minLength`,
//!   `maxLength` or `format` next to `pattern`; bounds on `"type": "number"` or without a type;
//!   `minLength` without `"type": "string"`; `minItems` / `maxItems` without `items`;
//!   `required` without `properties` or naming a property not in `properties`; `prefixItems`
//!   next to a schema `items`; `minItems` / `maxItems` that a tuple (always all its items)
//!   breaks; `allOf` components or keywords that llama.cpp's merge drops or gets wrong (other
//!   kinds of components, duplicate properties, `additionalProperties` across several
//!   components, `required` in an `anyOf` alternative, enums without a common value);
//! - `format` other than the ones above (even on non-strings); a `type` that is not a JSON
//!   Schema type (llama.cpp also takes its internal rule names, `"type": "uuid"`);
//! - references that are remote (`https://...`), not `#/...` (`#` alone, anchors), or that do
//!   not resolve; a reference that can produce nothing (it only refers back to itself);
//! - patterns outside the faithful subset: not anchored `^...$`, anchors, lookarounds, named
//!   groups, backreferences, `\d`/`\w`/`\s`/`\b` and other escapes the grammar lacks, `+?` and
//!   `{m,n}?` (llama.cpp makes them optional), stacked quantifiers, unbalanced brackets, stray
//!   `]` or `}`, empty or POSIX classes, and a quantifier right after an escape or `"` that ends
//!   a longer literal, or after `\xHH` / `\uHHHH` (llama.cpp repeats the wrong part), and `*`
//!   or `+` after a group with an empty alternative (`(a|)*`: llama.cpp writes a left-recursive
//!   rule);
//! - the schema `false`, `items: false` without a tuple, non-schema values where a schema goes,
//!   and malformed values (a negative `minLength`, an empty `enum` or `anyOf`, `minItems` above
//!   `maxItems`, bounds no integer meets, a draft-4 boolean `exclusiveMinimum`);
//! - schemas (with the references they follow) nested more than 128 levels deep, and patterns
//!   with groups nested more than 64 deep.
//!
//! Where llama.cpp fails, or would emit a wrong grammar, this crate differs in output:
//! - the schema `true` is any value (llama.cpp fails);
//! - an array `prefixItems` with `items` `false`, `true` or `{}` is the tuple (llama.cpp uses
//!   `items` only, or fails on `false`);
//! - references are resolved wherever they are (llama.cpp does not look for references inside
//!   a schema that has `$ref` itself, `$defs` included, and then emits `object` for them); it
//!   does not hoist `$defs` nested in subschemas to the root (a newer llama.cpp does);
//! - integer bounds: a fractional bound rounds inwards (llama.cpp truncates) and of `minimum`
//!   and `exclusiveMinimum` the tighter counts (llama.cpp reads only `minimum`); one-sided
//!   bounds are limited to 15 digits, where the construction is exact;
//! - names of additional properties: the trie that excludes the listed names escapes `]`, `^`
//!   and `-` in classes and works on characters, not bytes (llama.cpp's output breaks for such
//!   names); names that need JSON escapes are refused;
//! - pattern literals are read per character (llama.cpp splits non-ASCII characters into
//!   bytes).
//!
//! Known limits shared with llama.cpp: pattern characters are matched against the JSON text of
//! the string, so a pattern that can match `"`, `\` or control characters (the `dot`, negated
//! classes) admits invalid JSON; `format: date` does not check days against months; a negative
//! `maximum` without `minimum` admits leading zeros (`-04`); large counts (`maxLength: 5000`)
//! exceed the repetition limit of llama.cpp's grammar parser; a recursive reference reached
//! first through `anyOf` (`A = anyOf [A, ...]`) gives a left-recursive rule, which grammar
//! parsers reject.

mod convert;
mod error;
mod int_range;
mod json;
mod keywords;
mod pattern;
mod rules;
mod types;

pub use error::SchemaError;

use serde_json::Value;

/// The GBNF grammar for `schema`: one `name ::= body` line per rule, in name order, `root` the
/// start rule.
pub fn to_grammar(schema: &Value) -> Result<String, SchemaError> {
    convert::Converter::new(schema).convert()
}

/// [`to_grammar`] of the schema in the JSON text `text`.
pub fn to_grammar_str(text: &str) -> Result<String, SchemaError> {
    let schema: Value = serde_json::from_str(text).map_err(|e| {
        let full = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let message = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
        SchemaError::Json { line: e.line(), column: e.column(), message }
    })?;
    to_grammar(&schema)
}
