//! The cases of llama.cpp's `tests/test-json-schema-to-grammar.cpp` (the C++ converter's, the
//! "C++ only" ones included): each schema with the grammar llama.cpp expects, or its expected
//! failure. Not ported: the Gemma 4 dialect cases (another output dialect, not offered here)
//! and the `resolves_to_string` cases (another API of llama.cpp's).
//!
//! Grammars compare as llama.cpp's test compares them: leading and trailing whitespace of the
//! whole text and leading whitespace of each line do not count.
//!
//! One case expects acceptance where this crate refuses on purpose; it keeps llama.cpp's
//! expectation and asserts the error instead (see "array with empty items and prefixItems").

use schema::{SchemaError, to_grammar_str};

enum Expect {
    /// llama.cpp's expected grammar.
    Grammar(&'static str),
    /// llama.cpp expects the conversion to fail.
    Failure,
    /// llama.cpp accepts the schema (with this grammar); this crate refuses it on purpose, at
    /// this JSON pointer.
    DeliberateError { llama: &'static str, pointer: &'static str },
}

struct Case {
    name: &'static str,
    schema: &'static str,
    expect: Expect,
}

use Expect::*;

const CASES: &[Case] = &[
    Case {
        name: "min 0",
        schema: r##"{"type": "integer", "minimum": 0}"##,
        expect: Grammar(
            r#"
            root ::= ([0] | [1-9] [0-9]{0,15}) space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "min 1",
        schema: r##"{"type": "integer", "minimum": 1}"##,
        expect: Grammar(
            r#"
            root ::= ([1-9] [0-9]{0,15}) space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "min 3",
        schema: r##"{"type": "integer", "minimum": 3}"##,
        expect: Grammar(
            r#"
            root ::= ([1-2] [0-9]{1,15} | [3-9] [0-9]{0,15}) space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "min 9",
        schema: r##"{"type": "integer", "minimum": 9}"##,
        expect: Grammar(
            r#"
            root ::= ([1-8] [0-9]{1,15} | [9] [0-9]{0,15}) space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "min 10",
        schema: r##"{"type": "integer", "minimum": 10}"##,
        expect: Grammar(
            r#"
            root ::= ([1] ([0-9]{1,15}) | [2-9] [0-9]{1,15}) space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "min 25",
        schema: r##"{"type": "integer", "minimum": 25}"##,
        expect: Grammar(
            r#"
            root ::= ([1] [0-9]{2,15} | [2] ([0-4] [0-9]{1,14} | [5-9] [0-9]{0,14}) | [3-9] [0-9]{1,15}) space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "max 30",
        schema: r##"{"type": "integer", "maximum": 30}"##,
        expect: Grammar(
            r#"
            root ::= ("-" [1-9] [0-9]{0,15} | [0-9] | ([1-2] [0-9] | [3] "0")) space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "min -5",
        schema: r##"{"type": "integer", "minimum": -5}"##,
        expect: Grammar(
            r#"
            root ::= ("-" ([0-5]) | [0] | [1-9] [0-9]{0,15}) space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "min -123",
        schema: r##"{"type": "integer", "minimum": -123}"##,
        expect: Grammar(
            r#"
            root ::= ("-" ([0-9] | ([1-8] [0-9] | [9] [0-9]) | "1" ([0-1] [0-9] | [2] [0-3])) | [0] | [1-9] [0-9]{0,15}) space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "max -5",
        schema: r##"{"type": "integer", "maximum": -5}"##,
        expect: Grammar(
            r#"
            root ::= ("-" ([0-4] [0-9]{1,15} | [5-9] [0-9]{0,15})) space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "max 1",
        schema: r##"{"type": "integer", "maximum": 1}"##,
        expect: Grammar(
            r#"
            root ::= ("-" [1-9] [0-9]{0,15} | [0-1]) space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "max 100",
        schema: r##"{"type": "integer", "maximum": 100}"##,
        expect: Grammar(
            r#"
            root ::= ("-" [1-9] [0-9]{0,15} | [0-9] | ([1-8] [0-9] | [9] [0-9]) | "100") space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "min 0 max 23",
        schema: r##"{"type": "integer", "minimum": 0, "maximum": 23}"##,
        expect: Grammar(
            r#"
            root ::= ([0-9] | ([1] [0-9] | [2] [0-3])) space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "min 15 max 300",
        schema: r##"{"type": "integer", "minimum": 15, "maximum": 300}"##,
        expect: Grammar(
            r#"
            root ::= (([1] ([5-9]) | [2-9] [0-9]) | ([1-2] [0-9]{2} | [3] "00")) space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "min 5 max 30",
        schema: r##"{"type": "integer", "minimum": 5, "maximum": 30}"##,
        expect: Grammar(
            r#"
            root ::= ([5-9] | ([1-2] [0-9] | [3] "0")) space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "min -123 max 42",
        schema: r##"{"type": "integer", "minimum": -123, "maximum": 42}"##,
        expect: Grammar(
            r#"
            root ::= ("-" ([0-9] | ([1-8] [0-9] | [9] [0-9]) | "1" ([0-1] [0-9] | [2] [0-3])) | [0-9] | ([1-3] [0-9] | [4] [0-2])) space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "min -10 max 10",
        schema: r##"{"type": "integer", "minimum": -10, "maximum": 10}"##,
        expect: Grammar(
            r#"
            root ::= ("-" ([0-9] | "10") | [0-9] | "10") space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case { name: "unknown type", schema: r##"{"type": "kaboom"}"##, expect: Failure },
    Case { name: "invalid type", schema: r##"{"type": 123}"##, expect: Failure },
    Case {
        name: "empty schema (object)",
        schema: r##"{}"##,
        expect: Grammar(
            r#"
            array ::= "[" space ( value ("," space value)* )? "]" space
            boolean ::= ("true" | "false") space
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            decimal-part ::= [0-9]{1,16}
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            null ::= "null" space
            number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            object ::= "{" space ( string ":" space value ("," space string ":" space value)* )? "}" space
            root ::= object
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            value ::= object | array | string | number | boolean | null
            "#,
        ),
    },
    Case {
        name: "exotic formats",
        schema: r##"{
            "items": [
                { "format": "date" },
                { "format": "uuid" },
                { "format": "time" },
                { "format": "date-time" }
            ]
        }"##,
        expect: Grammar(
            r#"
            date ::= [0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )
            date-string ::= "\"" date "\"" space
            date-time ::= date "T" time
            date-time-string ::= "\"" date-time "\"" space
            root ::= "[" space tuple-0 "," space uuid "," space tuple-2 "," space tuple-3 "]" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            time ::= ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )
            time-string ::= "\"" time "\"" space
            tuple-0 ::= date-string
            tuple-2 ::= time-string
            tuple-3 ::= date-time-string
            uuid ::= "\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"" space
            "#,
        ),
    },
    Case {
        name: "string",
        schema: r##"{"type": "string"}"##,
        expect: Grammar(
            r#"
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            root ::= "\"" char* "\"" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "string w/ min length 1",
        schema: r##"{"type": "string", "minLength": 1}"##,
        expect: Grammar(
            r#"
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            root ::= "\"" char+ "\"" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "string w/ min length 3",
        schema: r##"{"type": "string", "minLength": 3}"##,
        expect: Grammar(
            r#"
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            root ::= "\"" char{3,} "\"" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "string w/ max length",
        schema: r##"{"type": "string", "maxLength": 3}"##,
        expect: Grammar(
            r#"
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            root ::= "\"" char{0,3} "\"" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "string w/ min & max length",
        schema: r##"{"type": "string", "minLength": 1, "maxLength": 4}"##,
        expect: Grammar(
            r#"
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            root ::= "\"" char{1,4} "\"" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "boolean",
        schema: r##"{"type": "boolean"}"##,
        expect: Grammar(
            r#"
            root ::= ("true" | "false") space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "integer",
        schema: r##"{"type": "integer"}"##,
        expect: Grammar(
            r#"
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            root ::= ("-"? integral-part) space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "string const",
        schema: r##"{"const": "foo"}"##,
        expect: Grammar(
            r#"
            root ::= "\"foo\"" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "non-string const",
        schema: r##"{"const": 123}"##,
        expect: Grammar(
            r#"
            root ::= "123" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "non-string enum",
        schema: r##"{"enum": ["red", "amber", "green", null, 42, ["foo"]]}"##,
        expect: Grammar(
            r#"
            root ::= ("\"red\"" | "\"amber\"" | "\"green\"" | "null" | "42" | "[\"foo\"]") space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "string array",
        schema: r##"{"type": "array", "prefixItems": { "type": "string" }}"##,
        expect: Grammar(
            r#"
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            root ::= "[" space (string ("," space string)*)? "]" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            "#,
        ),
    },
    Case {
        name: "nullable string array",
        schema: r##"{"type": ["array", "null"], "prefixItems": { "type": "string" }}"##,
        expect: Grammar(
            r#"
            alternative-0 ::= "[" space (string ("," space string)*)? "]" space
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            null ::= "null" space
            root ::= alternative-0 | null
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            "#,
        ),
    },
    Case {
        name: "tuple1",
        schema: r##"{"prefixItems": [{ "type": "string" }]}"##,
        expect: Grammar(
            r#"
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            root ::= "[" space string "]" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            "#,
        ),
    },
    Case {
        name: "tuple2",
        schema: r##"{"prefixItems": [{ "type": "string" }, { "type": "number" }]}"##,
        expect: Grammar(
            r#"
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            decimal-part ::= [0-9]{1,16}
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            root ::= "[" space string "," space number "]" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            "#,
        ),
    },
    Case {
        name: "array with empty items",
        schema: r##"{"type": "array", "items": {}}"##,
        expect: Grammar(
            r#"
            array ::= "[" space ( value ("," space value)* )? "]" space
            boolean ::= ("true" | "false") space
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            decimal-part ::= [0-9]{1,16}
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            item ::= object
            null ::= "null" space
            number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            object ::= "{" space ( string ":" space value ("," space string ":" space value)* )? "}" space
            root ::= "[" space (item ("," space item)*)? "]" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            value ::= object | array | string | number | boolean | null
            "#,
        ),
    },
    // Deliberate difference: llama.cpp reads `items` and drops `prefixItems` (here a schema for
    // every item, as llama.cpp reads a non-array `prefixItems`), so its grammar generates
    // objects where the schema asks for strings.
    Case {
        name: "array with empty items and prefixItems",
        schema: r##"{"type": "array", "items": {}, "prefixItems": { "type": "string" }}"##,
        expect: DeliberateError {
            pointer: "/prefixItems",
            llama: r#"
            array ::= "[" space ( value ("," space value)* )? "]" space
            boolean ::= ("true" | "false") space
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            decimal-part ::= [0-9]{1,16}
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            item ::= object
            null ::= "null" space
            number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            object ::= "{" space ( string ":" space value ("," space string ":" space value)* )? "}" space
            root ::= "[" space (item ("," space item)*)? "]" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            value ::= object | array | string | number | boolean | null
            "#,
        },
    },
    Case {
        name: "number",
        schema: r##"{"type": "number"}"##,
        expect: Grammar(
            r#"
            decimal-part ::= [0-9]{1,16}
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            root ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "minItems",
        schema: r##"{"items": {"type": "boolean"}, "minItems": 2}"##,
        expect: Grammar(
            r#"
            boolean ::= ("true" | "false") space
            root ::= "[" space boolean ("," space boolean)+ "]" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "maxItems 0",
        schema: r##"{"items": {"type": "boolean"}, "maxItems": 0}"##,
        expect: Grammar(
            r#"
            boolean ::= ("true" | "false") space
            root ::= "[" space  "]" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "maxItems 1",
        schema: r##"{"items": {"type": "boolean"}, "maxItems": 1}"##,
        expect: Grammar(
            r#"
            boolean ::= ("true" | "false") space
            root ::= "[" space boolean? "]" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "maxItems 2",
        schema: r##"{"items": {"type": "boolean"}, "maxItems": 2}"##,
        expect: Grammar(
            r#"
            boolean ::= ("true" | "false") space
            root ::= "[" space (boolean ("," space boolean)?)? "]" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "min + maxItems",
        schema: r##"{"items": {"type": ["number", "integer"]}, "minItems": 3, "maxItems": 5}"##,
        expect: Grammar(
            r#"
            decimal-part ::= [0-9]{1,16}
            integer ::= ("-"? integral-part) space
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            item ::= number | integer
            number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            root ::= "[" space item ("," space item){2,4} "]" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "min + max items with min + max values across zero",
        schema: r##"{
            "items": {"type": "integer", "minimum": -12, "maximum": 207},
            "minItems": 3,
            "maxItems": 5
        }"##,
        expect: Grammar(
            r#"
            item ::= ("-" ([0-9] | "1" [0-2]) | [0-9] | ([1-8] [0-9] | [9] [0-9]) | ([1] [0-9]{2} | [2] "0" [0-7])) space
            root ::= "[" space item ("," space item){2,4} "]" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "min + max items with min + max values",
        schema: r##"{
            "items": {"type": "integer", "minimum": 12, "maximum": 207},
            "minItems": 3,
            "maxItems": 5
        }"##,
        expect: Grammar(
            r#"
            item ::= (([1] ([2-9]) | [2-9] [0-9]) | ([1] [0-9]{2} | [2] "0" [0-7])) space
            root ::= "[" space item ("," space item){2,4} "]" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "simple regexp",
        schema: r##"{"type": "string", "pattern": "^abc?d*efg+(hij)?kl$"}"##,
        expect: Grammar(
            r#"
            root ::= "\"" ("ab" "c"? "d"* "ef" "g"+ ("hij")? "kl") "\"" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "regexp escapes",
        schema: r##"{"type": "string", "pattern": "^\\[\\]\\{\\}\\(\\)\\|\\+\\*\\?$"}"##,
        expect: Grammar(
            r#"
            root ::= "\"" ("[]{}()|+*?") "\"" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "regexp quote",
        schema: r##"{"type": "string", "pattern": "^\"$"}"##,
        expect: Grammar(
            r#"
            root ::= "\"" ("\"") "\"" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "regexp with top-level alternation",
        schema: r##"{"type": "string", "pattern": "^A|B|C|D$"}"##,
        expect: Grammar(
            r#"
            root ::= "\"" ("A" | "B" | "C" | "D") "\"" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "regexp",
        schema: r##"{"type": "string", "pattern": "^(\\([0-9]{1,3}\\))?[0-9]{3}-[0-9]{4} a{3,5}nd...$"}"##,
        expect: Grammar(
            r#"
            dot ::= [^\x0A\x0D]
            root ::= "\"" (("(" root-1{1,3} ")")? root-1{3,3} "-" root-1{4,4} " " "a"{3,5} "nd" dot dot dot) "\"" space
            root-1 ::= [0-9]
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "required props in original order",
        schema: r##"{
            "type": "object",
            "properties": {
                "b": {"type": "string"},
                "c": {"type": "string"},
                "a": {"type": "string"}
            },
            "required": ["a", "b", "c"],
            "additionalProperties": false,
            "definitions": {}
        }"##,
        expect: Grammar(
            r#"
            a-kv ::= "\"a\"" space ":" space string
            b-kv ::= "\"b\"" space ":" space string
            c-kv ::= "\"c\"" space ":" space string
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            root ::= "{" space b-kv "," space c-kv "," space a-kv "}" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            "#,
        ),
    },
    Case {
        name: "1 optional prop",
        schema: r##"{"properties": {"a": {"type": "string"}}, "additionalProperties": false}"##,
        expect: Grammar(
            r#"
            a-kv ::= "\"a\"" space ":" space string
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            root ::= "{" space  (a-kv )? "}" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            "#,
        ),
    },
    Case {
        name: "N optional props",
        schema: r##"{
            "properties": {
                "a": {"type": "string"},
                "b": {"type": "string"},
                "c": {"type": "string"}
            },
            "additionalProperties": false
        }"##,
        expect: Grammar(
            r#"
            a-kv ::= "\"a\"" space ":" space string
            a-rest ::= ( "," space b-kv )? b-rest
            b-kv ::= "\"b\"" space ":" space string
            b-rest ::= ( "," space c-kv )?
            c-kv ::= "\"c\"" space ":" space string
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            root ::= "{" space  (a-kv a-rest | b-kv b-rest | c-kv )? "}" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            "#,
        ),
    },
    Case {
        name: "required + optional props each in original order",
        schema: r##"{
            "properties": {
                "b": {"type": "string"},
                "a": {"type": "string"},
                "d": {"type": "string"},
                "c": {"type": "string"}
            },
            "required": ["a", "b"],
            "additionalProperties": false
        }"##,
        expect: Grammar(
            r#"
            a-kv ::= "\"a\"" space ":" space string
            b-kv ::= "\"b\"" space ":" space string
            c-kv ::= "\"c\"" space ":" space string
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            d-kv ::= "\"d\"" space ":" space string
            d-rest ::= ( "," space c-kv )?
            root ::= "{" space b-kv "," space a-kv ( "," space ( d-kv d-rest | c-kv ) )? "}" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            "#,
        ),
    },
    Case {
        name: "additional props",
        schema: r##"{
            "type": "object",
            "additionalProperties": {"type": "array", "items": {"type": "number"}}
        }"##,
        expect: Grammar(
            r#"
            additional-kv ::= string ":" space additional-value
            additional-value ::= "[" space (number ("," space number)*)? "]" space
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            decimal-part ::= [0-9]{1,16}
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            root ::= "{" space  (additional-kv ( "," space additional-kv )* )? "}" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            "#,
        ),
    },
    Case {
        name: "additional props (true)",
        schema: r##"{"type": "object", "additionalProperties": true}"##,
        expect: Grammar(
            r#"
            array ::= "[" space ( value ("," space value)* )? "]" space
            boolean ::= ("true" | "false") space
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            decimal-part ::= [0-9]{1,16}
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            null ::= "null" space
            number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            object ::= "{" space ( string ":" space value ("," space string ":" space value)* )? "}" space
            root ::= object
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            value ::= object | array | string | number | boolean | null
            "#,
        ),
    },
    Case {
        name: "additional props (implicit)",
        schema: r##"{"type": "object"}"##,
        expect: Grammar(
            r#"
            array ::= "[" space ( value ("," space value)* )? "]" space
            boolean ::= ("true" | "false") space
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            decimal-part ::= [0-9]{1,16}
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            null ::= "null" space
            number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            object ::= "{" space ( string ":" space value ("," space string ":" space value)* )? "}" space
            root ::= object
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            value ::= object | array | string | number | boolean | null
            "#,
        ),
    },
    Case {
        name: "empty w/o additional props",
        schema: r##"{"type": "object", "additionalProperties": false}"##,
        expect: Grammar(
            r#"
            root ::= "{" space  "}" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "required + additional props",
        schema: r##"{
            "type": "object",
            "properties": {"a": {"type": "number"}},
            "required": ["a"],
            "additionalProperties": {"type": "string"}
        }"##,
        expect: Grammar(
            r#"
            a-kv ::= "\"a\"" space ":" space number
            additional-k ::= ["] ( [a] char+ | [^"a] char* )? ["] space
            additional-kv ::= additional-k ":" space string
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            decimal-part ::= [0-9]{1,16}
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            root ::= "{" space a-kv ( "," space ( additional-kv ( "," space additional-kv )* ) )? "}" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            "#,
        ),
    },
    Case {
        name: "optional + additional props",
        schema: r##"{
            "type": "object",
            "properties": {"a": {"type": "number"}},
            "additionalProperties": {"type": "number"}
        }"##,
        expect: Grammar(
            r#"
            a-kv ::= "\"a\"" space ":" space number
            a-rest ::= ( "," space additional-kv )*
            additional-k ::= ["] ( [a] char+ | [^"a] char* )? ["] space
            additional-kv ::= additional-k ":" space number
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            decimal-part ::= [0-9]{1,16}
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            root ::= "{" space  (a-kv a-rest | additional-kv ( "," space additional-kv )* )? "}" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "required + optional + additional props",
        schema: r##"{
            "type": "object",
            "properties": {
                "and": {"type": "number"},
                "also": {"type": "number"}
            },
            "required": ["and"],
            "additionalProperties": {"type": "number"}
        }"##,
        expect: Grammar(
            r#"
            additional-k ::= ["] ( [a] ([l] ([s] ([o] char+ | [^"o] char*) | [^"s] char*) | [n] ([d] char+ | [^"d] char*) | [^"ln] char*) | [^"a] char* )? ["] space
            additional-kv ::= additional-k ":" space number
            also-kv ::= "\"also\"" space ":" space number
            also-rest ::= ( "," space additional-kv )*
            and-kv ::= "\"and\"" space ":" space number
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            decimal-part ::= [0-9]{1,16}
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            root ::= "{" space and-kv ( "," space ( also-kv also-rest | additional-kv ( "," space additional-kv )* ) )? "}" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "optional props with empty name",
        schema: r##"{
            "properties": {
                "": {"type": "integer"},
                "a": {"type": "integer"}
            },
            "additionalProperties": {"type": "integer"}
        }"##,
        expect: Grammar(
            r#"
            -kv ::= "\"\"" space ":" space root
            -rest ::= ( "," space a-kv )? a-rest
            a-kv ::= "\"a\"" space ":" space integer
            a-rest ::= ( "," space additional-kv )*
            additional-k ::= ["] ( [a] char+ | [^"a] char* ) ["] space
            additional-kv ::= additional-k ":" space integer
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            integer ::= ("-"? integral-part) space
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            root ::= ("-"? integral-part) space
            root0 ::= "{" space  (-kv -rest | a-kv a-rest | additional-kv ( "," space additional-kv )* )? "}" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "optional props with nested names",
        schema: r##"{
            "properties": {
                "a": {"type": "integer"},
                "aa": {"type": "integer"}
            },
            "additionalProperties": {"type": "integer"}
        }"##,
        expect: Grammar(
            r#"
            a-kv ::= "\"a\"" space ":" space integer
            a-rest ::= ( "," space aa-kv )? aa-rest
            aa-kv ::= "\"aa\"" space ":" space integer
            aa-rest ::= ( "," space additional-kv )*
            additional-k ::= ["] ( [a] ([a] char+ | [^"a] char*) | [^"a] char* )? ["] space
            additional-kv ::= additional-k ":" space integer
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            integer ::= ("-"? integral-part) space
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            root ::= "{" space  (a-kv a-rest | aa-kv aa-rest | additional-kv ( "," space additional-kv )* )? "}" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "optional props with common prefix",
        schema: r##"{
            "properties": {
                "ab": {"type": "integer"},
                "ac": {"type": "integer"}
            },
            "additionalProperties": {"type": "integer"}
        }"##,
        expect: Grammar(
            r#"
            ab-kv ::= "\"ab\"" space ":" space integer
            ab-rest ::= ( "," space ac-kv )? ac-rest
            ac-kv ::= "\"ac\"" space ":" space integer
            ac-rest ::= ( "," space additional-kv )*
            additional-k ::= ["] ( [a] ([b] char+ | [c] char+ | [^"bc] char*) | [^"a] char* )? ["] space
            additional-kv ::= additional-k ":" space integer
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            integer ::= ("-"? integral-part) space
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            root ::= "{" space  (ab-kv ab-rest | ac-kv ac-rest | additional-kv ( "," space additional-kv )* )? "}" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "top-level $ref",
        schema: r##"{
            "$ref": "#/definitions/foo",
            "definitions": {
                "foo": {
                    "type": "object",
                    "properties": {"a": {"type": "string"}},
                    "required": ["a"],
                    "additionalProperties": false
                }
            }
        }"##,
        expect: Grammar(
            r#"
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            ref-definitions-foo ::= "{" space ref-definitions-foo-a-kv "}" space
            ref-definitions-foo-a-kv ::= "\"a\"" space ":" space string
            root ::= ref-definitions-foo
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            "#,
        ),
    },
    Case {
        name: "anyOf",
        schema: r##"{
            "anyOf": [
                {"$ref": "#/definitions/foo"},
                {"$ref": "#/definitions/bar"}
            ],
            "definitions": {
                "foo": {"properties": {"a": {"type": "number"}}},
                "bar": {"properties": {"b": {"type": "number"}}}
            },
            "type": "object"
        }"##,
        expect: Grammar(
            r#"
            alternative-0 ::= ref-definitions-foo
            alternative-1 ::= ref-definitions-bar
            decimal-part ::= [0-9]{1,16}
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            ref-definitions-bar ::= "{" space  (ref-definitions-bar-b-kv )? "}" space
            ref-definitions-bar-b-kv ::= "\"b\"" space ":" space number
            ref-definitions-foo ::= "{" space  (ref-definitions-foo-a-kv )? "}" space
            ref-definitions-foo-a-kv ::= "\"a\"" space ":" space number
            root ::= alternative-0 | alternative-1
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "anyOf $ref",
        schema: r##"{
            "properties": {
                "a": {
                    "anyOf": [
                        {"type": "string"},
                        {"type": "number"}
                    ]
                },
                "b": {
                    "anyOf": [
                        {"$ref": "#/properties/a/anyOf/0"},
                        {"type": "boolean"}
                    ]
                }
            },
            "type": "object"
        }"##,
        expect: Grammar(
            r#"
            a ::= string | number
            a-kv ::= "\"a\"" space ":" space a
            a-rest ::= ( "," space b-kv )?
            b ::= b-0 | boolean
            b-0 ::= string
            b-kv ::= "\"b\"" space ":" space b
            boolean ::= ("true" | "false") space
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            decimal-part ::= [0-9]{1,16}
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            root ::= "{" space  (a-kv a-rest | b-kv )? "}" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            "#,
        ),
    },
    Case {
        name: "mix of allOf, anyOf and $ref (similar to https://json.schemastore.org/tsconfig.json)",
        schema: r##"{
            "allOf": [
                {"$ref": "#/definitions/foo"},
                {"$ref": "#/definitions/bar"},
                {
                    "anyOf": [
                        {"$ref": "#/definitions/baz"},
                        {"$ref": "#/definitions/bam"}
                    ]
                }
            ],
            "definitions": {
                "foo": {"properties": {"a": {"type": "number"}}},
                "bar": {"properties": {"b": {"type": "number"}}},
                "bam": {"properties": {"c": {"type": "number"}}},
                "baz": {"properties": {"d": {"type": "number"}}}
            },
            "type": "object"
        }"##,
        expect: Grammar(
            r#"
            a-kv ::= "\"a\"" space ":" space number
            b-kv ::= "\"b\"" space ":" space number
            c-kv ::= "\"c\"" space ":" space number
            d-kv ::= "\"d\"" space ":" space number
            d-rest ::= ( "," space c-kv )?
            decimal-part ::= [0-9]{1,16}
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            root ::= "{" space a-kv "," space b-kv ( "," space ( d-kv d-rest | c-kv ) )? "}" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "allOf with enum schema",
        schema: r##"{
            "allOf": [{"$ref": "#/definitions/foo"}],
            "definitions": {"foo": {"type": "string", "enum": ["a", "b"]}}
        }"##,
        expect: Grammar(
            r#"
            root ::= ("\"a\"" | "\"b\"") space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "allOf with multiple enum schemas",
        schema: r##"{
            "allOf": [
                {"$ref": "#/definitions/foo"},
                {"$ref": "#/definitions/bar"}
            ],
            "definitions": {
                "foo": {"type": "string", "enum": ["a", "b", "c"]},
                "bar": {"type": "string", "enum": ["b", "c", "d"]}
            }
        }"##,
        expect: Grammar(
            r#"
            root ::= ("\"b\"" | "\"c\"") space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "conflicting names",
        schema: r##"{
            "type": "object",
            "properties": {
                "number": {
                    "type": "object",
                    "properties": {
                        "number": {
                            "type": "object",
                            "properties": {"root": {"type": "number"}},
                            "required": ["root"],
                            "additionalProperties": false
                        }
                    },
                    "required": ["number"],
                    "additionalProperties": false
                }
            },
            "required": ["number"],
            "additionalProperties": false,
            "definitions": {}
        }"##,
        expect: Grammar(
            r#"
            decimal-part ::= [0-9]{1,16}
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            number- ::= "{" space number-number-kv "}" space
            number-kv ::= "\"number\"" space ":" space number-
            number-number ::= "{" space number-number-root-kv "}" space
            number-number-kv ::= "\"number\"" space ":" space number-number
            number-number-root-kv ::= "\"root\"" space ":" space number
            root ::= "{" space number-kv "}" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "description only (no type) treated as unconstrained",
        schema: r##"{"description": "The 0-based index of the last line to be retrieved (inclusive). If None, read until the end of the file."}"##,
        expect: Grammar(
            r#"
            array ::= "[" space ( value ("," space value)* )? "]" space
            boolean ::= ("true" | "false") space
            char ::= [^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})
            decimal-part ::= [0-9]{1,16}
            integral-part ::= [0] | [1-9] [0-9]{0,15}
            null ::= "null" space
            number ::= ("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space
            object ::= "{" space ( string ":" space value ("," space string ":" space value)* )? "}" space
            root ::= value
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            string ::= "\"" char* "\"" space
            value ::= object | array | string | number | boolean | null
            "#,
        ),
    },
    Case {
        name: "literal string with escapes",
        schema: r##"{
            "properties": {
                "code": {
                    "const": " \r \n \" \\ ",
                    "description": "Generated code",
                    "title": "Code",
                    "type": "string"
                }
            },
            "required": ["code"],
            "title": "DecoderResponse",
            "type": "object"
        }"##,
        expect: Grammar(
            r#"
            code ::= "\" \\r \\n \\\" \\\\ \"" space
            code-kv ::= "\"code\"" space ":" space code
            root ::= "{" space code-kv "}" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    // llama.cpp's "C++ only" cases.
    Case {
        name: "regexp with non-capturing group",
        schema: r##"{"type": "string", "pattern": "^(?:foo|bar)baz$"}"##,
        expect: Grammar(
            r#"
            root ::= "\"" (("foo" | "bar") "baz") "\"" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
    Case {
        name: "regexp with nested non-capturing groups",
        schema: r##"{"type": "string", "pattern": "^(?:(?:ab)+c)?d$"}"##,
        expect: Grammar(
            r#"
            root ::= "\"" ((("ab")+ "c")? "d") "\"" space
            space ::= | " " | "\n"{1,2} [ \t]{0,20}
            "#,
        ),
    },
];

/// llama.cpp's comparison: trimmed, and each line's leading whitespace dropped.
fn trim(text: &str) -> String {
    text.trim().lines().map(str::trim_start).collect::<Vec<_>>().join("\n")
}

/// Runs one case; `Err` says how it failed.
fn run(case: &Case) -> Result<(), String> {
    let result = to_grammar_str(case.schema);
    match (&case.expect, result) {
        (Grammar(want), Ok(got)) => {
            if trim(&got) == trim(want) {
                Ok(())
            } else {
                Err(format!("expected:\n{}\ngot:\n{}", trim(want), trim(&got)))
            }
        }
        (Grammar(_), Err(e)) => Err(format!("expected a grammar, got the error: {e}")),
        (Failure, Err(SchemaError::Json { .. })) => Err("expected a schema error, got a JSON error".to_owned()),
        (Failure, Err(_)) => Ok(()),
        (Failure, Ok(got)) => Err(format!("expected a failure, got:\n{got}")),
        (DeliberateError { pointer, .. }, Err(e)) if e.pointer() == Some(pointer) => Ok(()),
        (DeliberateError { pointer, .. }, Err(e)) => Err(format!("expected an error at {pointer}, got: {e}")),
        (DeliberateError { llama, .. }, Ok(got)) => Err(format!(
            "expected the deliberate error, got a grammar{}:\n{got}",
            if trim(&got) == trim(llama) { " (llama.cpp's)" } else { "" }
        )),
    }
}

#[test]
fn llama_cpp_cases() {
    let failures: Vec<String> =
        CASES.iter().filter_map(|case| run(case).err().map(|why| format!("# {}\n{why}", case.name))).collect();
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), CASES.len(), failures.join("\n\n"));
}

#[test]
fn case_count() {
    // 73 cases of `test_all` and the 2 "C++ only" ones.
    assert_eq!(CASES.len(), 75);
    let names: std::collections::HashSet<&str> = CASES.iter().map(|c| c.name).collect();
    assert_eq!(names.len(), CASES.len(), "case names are unique");
}

#[test]
fn every_converted_grammar_parses_in_the_grammar_crate() {
    // The converter's output is what the grammar stages compile: each must parse and pass
    // llama.cpp's checks (rules defined, a root, no left recursion).
    let mut bad = Vec::new();
    for case in CASES {
        if let Ok(text) = to_grammar_str(case.schema)
            && let Err(e) = grammar::Grammar::new(&text)
        {
            bad.push(format!("# {}: {e}\n{text}", case.name));
        }
    }
    assert!(bad.is_empty(), "{} grammars do not parse:\n{}", bad.len(), bad.join("\n\n"));
}
