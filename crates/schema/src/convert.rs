//! The walk over a schema: which rule each schema becomes (the choice llama.cpp's converter
//! makes, in its order), the rule texts, and the check that every keyword of a schema is either
//! applied by that rule or constrains nothing the rule can produce.

use crate::error::SchemaError;
use crate::int_range::int_range;
use crate::json::{child, dump, dump_string, index, unescape_token, value_type};
use crate::keywords::{self, Kind};
use crate::pattern;
use crate::rules::{self, Rules, literal, repetition};
use crate::types::Types;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet};

type Result<T> = std::result::Result<T, SchemaError>;

/// How deep schemas (and references) may nest before the converter gives up: the walk recurses,
/// and 128 levels (serde_json's own nesting limit) stay well inside a 2 MiB thread stack even
/// in an unoptimised build.
const MAX_DEPTH: usize = 128;

/// Largest bound, in absolute value, of an integer range open on one side: past 15 digits the
/// digit-by-digit construction (which assumes at most 16 digits) would not be exact.
const MAX_HALF_OPEN_BOUND: i64 = 999_999_999_999_999;

/// The rule a schema becomes, chosen as llama.cpp's `visit` chooses: the first that applies.
#[derive(Clone, Copy, Debug)]
enum Branch<'v> {
    /// `$ref`: the referenced schema's rule.
    Ref(&'v str),
    /// `oneOf` (if present) or `anyOf`: the alternatives.
    Union(&'static str),
    /// `type` is an array: the schema once per type.
    TypeUnion(&'v [Value]),
    Const,
    Enum,
    /// `properties`, or `additionalProperties` other than `true` (type absent or object).
    Object,
    /// `allOf` (type absent, object or string).
    AllOf,
    /// `items` or `prefixItems` (type absent or array).
    Array,
    /// `pattern` (type absent or string).
    Pattern,
    /// `format` uuid, uuid1..uuid5 (type absent or string).
    Uuid(&'v str),
    /// `format` date, time or date-time (type absent or string).
    Format(&'v str),
    /// `minLength`/`maxLength` with type string.
    StringLength,
    /// Bounds with type integer.
    IntRange,
    /// The empty schema `{}`, or type object with nothing else: any object.
    AnyObject,
    /// No type and no keyword that picks another rule: any value.
    AnyValue,
    /// A type alone.
    Primitive(&'v str),
    /// A type that is not a type.
    Unrecognized,
}

impl Branch<'_> {
    /// Whether this rule applies `keyword` (other than `type`, checked on its own).
    fn applies(self, keyword: &str, map: &Map<String, Value>) -> bool {
        match self {
            Branch::Ref(_) => keyword == "$ref",
            Branch::Union(key) => keyword == key,
            Branch::TypeUnion(_) => false,
            Branch::Const => keyword == "const",
            Branch::Enum => keyword == "enum",
            Branch::Object => matches!(keyword, "properties" | "required" | "additionalProperties"),
            Branch::AllOf => keyword == "allOf",
            Branch::Array => match keyword {
                "items" | "minItems" | "maxItems" | "additionalItems" => true,
                "prefixItems" => match map.get("items") {
                    None => true,
                    Some(items) => tuple_closed_by(items) && map["prefixItems"].is_array(),
                },
                _ => false,
            },
            Branch::Pattern => keyword == "pattern",
            Branch::Uuid(_) | Branch::Format(_) => keyword == "format",
            Branch::StringLength => matches!(keyword, "minLength" | "maxLength"),
            Branch::IntRange => matches!(keyword, "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum"),
            Branch::AnyObject | Branch::AnyValue | Branch::Primitive(_) | Branch::Unrecognized => false,
        }
    }

    /// Where a keyword this rule does not apply stands, for messages.
    fn context(self) -> String {
        match self {
            Branch::Ref(_) => "next to `$ref` (only the referenced schema is used)".to_owned(),
            Branch::Union(key) => format!("next to `{key}` (only the alternatives are used)"),
            Branch::TypeUnion(_) => "with a list of types".to_owned(),
            Branch::Const => "next to `const` (only the constant is used)".to_owned(),
            Branch::Enum => "next to `enum` (only the values are used)".to_owned(),
            Branch::Object => "in an object schema (only `properties`, `required` and `additionalProperties` \
                 are used)"
                .to_owned(),
            Branch::AllOf => "next to `allOf` (only its components are used)".to_owned(),
            Branch::Array => "in an array schema (only `items` or `prefixItems`, `minItems` and `maxItems` \
                 are used)"
                .to_owned(),
            Branch::Pattern => "next to `pattern` (only the pattern is used)".to_owned(),
            Branch::Uuid(_) | Branch::Format(_) => "next to `format` (only the format is used)".to_owned(),
            Branch::StringLength => "next to `minLength`/`maxLength`".to_owned(),
            Branch::IntRange => "next to integer bounds".to_owned(),
            Branch::AnyObject => "in a schema that allows any object".to_owned(),
            Branch::AnyValue => "in a schema without `type`, which allows any value".to_owned(),
            Branch::Primitive(t) => format!("with `\"type\": \"{t}\"`"),
            Branch::Unrecognized => "here".to_owned(),
        }
    }
}

/// Whether `items` next to an array `prefixItems` only closes or leaves open the tuple (false,
/// true, `{}`), so that the tuple alone is a faithful rule.
fn tuple_closed_by(items: &Value) -> bool {
    matches!(items, Value::Bool(_)) || items.as_object().is_some_and(|m| m.is_empty())
}

fn is_type(ty: Option<&Value>, name: &str) -> bool {
    ty.and_then(Value::as_str) == Some(name)
}

/// The rule llama.cpp's converter picks for this schema, with `ty` as its `type`.
fn select<'v>(map: &'v Map<String, Value>, ty: Option<&'v Value>) -> Branch<'v> {
    if let Some(r) = map.get("$ref") {
        return Branch::Ref(r.as_str().unwrap_or_default());
    }
    if map.contains_key("oneOf") {
        return Branch::Union("oneOf");
    }
    if map.contains_key("anyOf") {
        return Branch::Union("anyOf");
    }
    if let Some(Value::Array(types)) = ty {
        return Branch::TypeUnion(types);
    }
    if map.contains_key("const") {
        return Branch::Const;
    }
    if map.contains_key("enum") {
        return Branch::Enum;
    }
    let untyped = ty.is_none_or(Value::is_null);
    let object = untyped || is_type(ty, "object");
    let string = untyped || is_type(ty, "string");
    if object
        && (map.contains_key("properties") || map.get("additionalProperties").is_some_and(|a| a != &Value::Bool(true)))
    {
        return Branch::Object;
    }
    if (object || is_type(ty, "string")) && map.contains_key("allOf") {
        return Branch::AllOf;
    }
    if (untyped || is_type(ty, "array")) && (map.contains_key("items") || map.contains_key("prefixItems")) {
        return Branch::Array;
    }
    if string && map.contains_key("pattern") {
        return Branch::Pattern;
    }
    let format = map.get("format").and_then(Value::as_str).unwrap_or_default();
    if string && keywords::is_uuid_format(format) {
        return Branch::Uuid(format);
    }
    if string && matches!(format, "date" | "time" | "date-time") {
        return Branch::Format(format);
    }
    if is_type(ty, "string") && (map.contains_key("minLength") || map.contains_key("maxLength")) {
        return Branch::StringLength;
    }
    if is_type(ty, "integer")
        && ["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"].iter().any(|k| map.contains_key(*k))
    {
        return Branch::IntRange;
    }
    if map.is_empty() || is_type(ty, "object") {
        return Branch::AnyObject;
    }
    if untyped {
        return Branch::AnyValue;
    }
    match ty.and_then(Value::as_str) {
        Some(t) if rules::primitive(t).is_some() => Branch::Primitive(t),
        _ => Branch::Unrecognized,
    }
}

/// One schema that `allOf` draws from: a direct component, or an alternative of an `anyOf`
/// component (then its properties are optional), `$ref`s followed.
struct Component<'v> {
    schema: &'v Value,
    pointer: String,
    /// Which element of `allOf` it comes from.
    element: usize,
    /// Direct (its properties are required) or inside an `anyOf`.
    direct: bool,
    kind: ComponentKind,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ComponentKind {
    /// Has `properties`: they join the object.
    Properties,
    /// Has `enum` (and no `properties`): its values are intersected.
    Enum,
    /// Neither: llama.cpp ignores it.
    Other,
}

/// What llama.cpp's converter makes of an `allOf`.
struct AllOfPlan<'v> {
    components: Vec<Component<'v>>,
    /// The `enum` values of all components, by literal text: how many components list it.
    enum_counts: BTreeMap<String, (usize, &'v Value)>,
    /// The values every element of `allOf` lists, in literal-text order: when there are any,
    /// the rule is their alternatives; else an object of the components' properties.
    intersection: Vec<(String, &'v Value)>,
}

/// The walk: the rules built so far, the document's references and what they can produce.
pub(crate) struct Converter<'v> {
    root: &'v Value,
    rules: Rules,
    /// Each `$ref` of the document: the schema it points at, and that schema's pointer.
    refs: HashMap<String, (&'v Value, String)>,
    /// The types each reference's schema can produce (a least fixed point, so recursion
    /// through references counts only what finite values can be).
    ref_types: HashMap<String, Types>,
    /// References whose rule is being built (a reference back to one is recursion).
    resolving: HashSet<String>,
    depth: usize,
}

impl<'v> Converter<'v> {
    pub(crate) fn new(root: &'v Value) -> Self {
        Converter {
            root,
            rules: Rules::new(),
            refs: HashMap::new(),
            ref_types: HashMap::new(),
            resolving: HashSet::new(),
            depth: 0,
        }
    }

    /// The grammar for the whole document.
    pub(crate) fn convert(mut self) -> Result<String> {
        self.collect_refs()?;
        self.solve_ref_types();
        self.visit(self.root, "", "", None, true)?;
        Ok(self.rules.format())
    }

    // ---- references --------------------------------------------------------------------

    /// Records every `$ref` in schema positions of the document (referenced or not, as
    /// llama.cpp resolves them all up front), failing on one that does not resolve. The schemas
    /// references point at are walked too (they may lie under a keyword not walked here).
    fn collect_refs(&mut self) -> Result<()> {
        let mut pending: Vec<(&'v Value, String)> = vec![(self.root, String::new())];
        while let Some((node, ptr)) = pending.pop() {
            self.walk_refs(node, &ptr, 0, &mut pending)?;
        }
        Ok(())
    }

    fn walk_refs(
        &mut self,
        node: &'v Value,
        ptr: &str,
        depth: usize,
        pending: &mut Vec<(&'v Value, String)>,
    ) -> Result<()> {
        let Value::Object(map) = node else {
            return Ok(());
        };
        if depth > MAX_DEPTH {
            return Err(SchemaError::unsupported(ptr, "the schema nests too deeply"));
        }
        if let Some(r) = map.get("$ref") {
            let at = child(ptr, "$ref");
            let Some(reference) = r.as_str() else {
                return Err(SchemaError::invalid(&at, "`$ref` must be a string"));
            };
            if !self.refs.contains_key(reference) {
                let (target, target_ptr) = self.resolve(reference, &at)?;
                self.refs.insert(reference.to_owned(), (target, target_ptr.clone()));
                pending.push((target, target_ptr));
            }
        }
        for (key, value) in map {
            let here = child(ptr, key);
            match key.as_str() {
                "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" | "dependencies" => {
                    if let Value::Object(members) = value {
                        for (name, schema) in members {
                            self.walk_refs(schema, &child(&here, name), depth + 1, pending)?;
                        }
                    }
                }
                "items" | "prefixItems" | "allOf" | "anyOf" | "oneOf" => match value {
                    Value::Array(schemas) => {
                        for (i, schema) in schemas.iter().enumerate() {
                            self.walk_refs(schema, &index(&here, i), depth + 1, pending)?;
                        }
                    }
                    schema => self.walk_refs(schema, &here, depth + 1, pending)?,
                },
                "additionalProperties"
                | "additionalItems"
                | "not"
                | "if"
                | "then"
                | "else"
                | "contains"
                | "propertyNames"
                | "unevaluatedItems"
                | "unevaluatedProperties" => {
                    self.walk_refs(value, &here, depth + 1, pending)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The schema a `$ref` (found at `at`) points at, and its pointer.
    fn resolve(&self, reference: &str, at: &str) -> Result<(&'v Value, String)> {
        let Some(fragment) = reference.strip_prefix('#') else {
            let message = if reference.contains("://") {
                "is remote: only references into this document (`#/...`) are supported"
            } else {
                "is not supported: only references into this document (`#/...`) are"
            };
            return Err(SchemaError::reference(at, reference, message));
        };
        if !fragment.starts_with('/') {
            return Err(SchemaError::reference(
                at,
                reference,
                "is not supported: only JSON-pointer references (`#/...`) are (no `#` alone, no \
                 anchors)",
            ));
        }
        let mut target = self.root;
        let mut pointer = String::new();
        for raw in fragment[1..].split('/') {
            let token = unescape_token(raw);
            let next = match target {
                Value::Object(map) => map.get(&token),
                Value::Array(items) => {
                    let canonical = token == "0"
                        || (!token.is_empty() && !token.starts_with('0') && token.bytes().all(|b| b.is_ascii_digit()));
                    if canonical { token.parse::<usize>().ok().and_then(|i| items.get(i)) } else { None }
                }
                _ => None,
            };
            let Some(next) = next else {
                let place = if pointer.is_empty() { "the document root".to_owned() } else { format!("`{pointer}`") };
                return Err(SchemaError::reference(
                    at,
                    reference,
                    format!("does not resolve: {place} has no `{token}`"),
                ));
            };
            pointer = child(&pointer, &token);
            target = next;
        }
        Ok((target, pointer))
    }

    /// The collected target of a reference met at `at`.
    fn target(&self, reference: &str, at: &str) -> Result<(&'v Value, String)> {
        self.refs.get(reference).cloned().ok_or_else(|| SchemaError::reference(at, reference, "was not found"))
    }

    /// Computes what each reference can produce, up to a fixed point.
    fn solve_ref_types(&mut self) {
        let refs: Vec<(String, &'v Value)> = self.refs.iter().map(|(r, (target, _))| (r.clone(), *target)).collect();
        loop {
            let mut changed = false;
            for (reference, target) in &refs {
                let found = self.types_of(target);
                let known = self.ref_types.get(reference).copied().unwrap_or_default();
                if !(found.is_subset(known)) {
                    self.ref_types.insert(reference.clone(), known | found);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }

    // ---- what a rule produces ----------------------------------------------------------

    /// The JSON types the rule for `schema` can produce.
    fn types_of(&self, schema: &'v Value) -> Types {
        match schema {
            Value::Bool(true) => Types::ALL,
            Value::Object(map) => {
                let ty = map.get("type");
                self.branch_types(map, select(map, ty))
            }
            _ => Types::EMPTY,
        }
    }

    fn branch_types(&self, map: &'v Map<String, Value>, branch: Branch<'v>) -> Types {
        let fold = |values: Option<&'v Value>, f: &dyn Fn(&'v Value) -> Types| {
            values
                .and_then(Value::as_array)
                .map(|a| a.iter().fold(Types::EMPTY, |acc, v| acc | f(v)))
                .unwrap_or_default()
        };
        match branch {
            Branch::Ref(r) => self.ref_types.get(r).copied().unwrap_or_default(),
            Branch::Union(key) => fold(map.get(key), &|s| self.types_of(s)),
            Branch::TypeUnion(types) => {
                types.iter().fold(Types::EMPTY, |acc, t| acc | self.branch_types(map, select(map, Some(t))))
            }
            Branch::Const => map.get("const").map(value_type).unwrap_or_default(),
            Branch::Enum => fold(map.get("enum"), &value_type),
            Branch::Object | Branch::AnyObject => Types::OBJECT,
            Branch::AllOf => match self.plan_all_of(map, "") {
                Ok(plan) if !plan.intersection.is_empty() => {
                    plan.intersection.iter().fold(Types::EMPTY, |acc, (_, v)| acc | value_type(v))
                }
                _ => Types::OBJECT,
            },
            Branch::Array => Types::ARRAY,
            Branch::Pattern | Branch::Uuid(_) | Branch::Format(_) | Branch::StringLength => Types::STRING,
            Branch::IntRange => Types::INTEGER,
            Branch::AnyValue => Types::ALL,
            Branch::Primitive(t) => Types::named(t).unwrap_or_default(),
            Branch::Unrecognized => Types::EMPTY,
        }
    }

    // ---- the keyword check -------------------------------------------------------------

    /// The types a `type` keyword admits, or why it is not a valid `type`.
    fn declared_types(ty: &Value, at: &str) -> Result<Types> {
        let named = |v: &Value| -> Result<Types> {
            match v.as_str() {
                Some(name) => Types::named(name)
                    .ok_or_else(|| SchemaError::invalid(at, format!("`{name}` is not a JSON Schema type"))),
                None => Err(SchemaError::invalid(at, format!("a type must be a type name, not `{}`", dump(v)))),
            }
        };
        match ty {
            Value::Array(types) if types.is_empty() => Err(SchemaError::invalid(at, "the list of types is empty")),
            Value::Array(types) => types.iter().try_fold(Types::EMPTY, |acc, t| Ok(acc | named(t)?)),
            single => named(single),
        }
    }

    /// Checks that each keyword of the schema `map` (at `ptr`, with `ty` as its type) is applied
    /// by the rule chosen for it, or constrains nothing that rule can produce.
    fn check(&self, map: &'v Map<String, Value>, ptr: &str, ty: Option<&'v Value>) -> Result<()> {
        let declared = match ty {
            Some(t) => Some(Self::declared_types(t, &child(ptr, "type"))?),
            None => None,
        };
        let branch = select(map, ty);
        // With a list of types, the rule is the union of the schema taken once per type: a
        // keyword must be applied, or harmless, in each of them.
        let cases: Vec<(Branch<'v>, Types)> = match branch {
            Branch::TypeUnion(types) => types
                .iter()
                .map(|t| {
                    let b = select(map, Some(t));
                    (b, self.branch_types(map, b))
                })
                .collect(),
            b => vec![(b, self.branch_types(map, b))],
        };
        let produced = cases.iter().fold(Types::EMPTY, |acc, (_, t)| acc | *t);
        for (keyword, value) in map {
            let at = child(ptr, keyword);
            let kind = keywords::kind(keyword);
            if matches!(kind, Kind::Annotation | Kind::Unknown) {
                continue;
            }
            if keyword == "type" {
                let declared = declared.unwrap_or(Types::ALL);
                if !produced.is_subset(declared) {
                    return Err(SchemaError::unsupported(
                        &at,
                        format!(
                            "`type` is not enforced {}: the rule can also produce {}",
                            cases[0].0.context(),
                            produced.minus(declared).describe()
                        ),
                    ));
                }
                continue;
            }
            if keyword == "format" {
                match value.as_str() {
                    Some(f) if keywords::known_format(f) => {}
                    Some(f) => {
                        return Err(SchemaError::unsupported(
                            &at,
                            format!(
                                "the format `{f}` is not supported (known: date, time, \
                                 date-time, uuid, uuid1 to uuid5)"
                            ),
                        ));
                    }
                    None => return Err(SchemaError::invalid(&at, "`format` must be a string")),
                }
            }
            if keywords::is_no_op(keyword, value) {
                continue;
            }
            for &(case, case_types) in &cases {
                if case.applies(keyword, map) {
                    continue;
                }
                if let Kind::Only(only) = kind
                    && !case_types.intersects(only)
                {
                    continue;
                }
                return Err(SchemaError::unsupported(&at, ignored_message(keyword, case, ty)));
            }
        }
        Ok(())
    }

    // ---- the rules ---------------------------------------------------------------------

    /// The rule for `schema` (at `ptr`), named after `name`; `ty` replaces its `type` (one
    /// member of a list of types); `check` is false when the caller has checked the keywords.
    fn visit(
        &mut self,
        schema: &'v Value,
        ptr: &str,
        name: &str,
        ty: Option<&'v Value>,
        check: bool,
    ) -> Result<String> {
        if self.depth >= MAX_DEPTH {
            return Err(SchemaError::unsupported(ptr, "the schema nests too deeply"));
        }
        self.depth += 1;
        let result = self.visit_inner(schema, ptr, name, ty, check);
        self.depth -= 1;
        result
    }

    fn visit_inner(
        &mut self,
        schema: &'v Value,
        ptr: &str,
        name: &str,
        ty_override: Option<&'v Value>,
        check: bool,
    ) -> Result<String> {
        let rule_name = if rules::is_reserved(name) {
            format!("{name}-")
        } else if name.is_empty() {
            "root".to_owned()
        } else {
            name.to_owned()
        };
        let map = match schema {
            Value::Object(map) => map,
            Value::Bool(true) => {
                let value = self.rules.add_primitive("value");
                return Ok(self.rules.add(&rule_name, &value));
            }
            Value::Bool(false) => {
                return Err(SchemaError::unsupported(ptr, "the schema `false` (no value) is not supported"));
            }
            other => {
                return Err(SchemaError::invalid(
                    ptr,
                    format!("a schema must be an object or a boolean, not `{}`", dump(other)),
                ));
            }
        };
        let ty = ty_override.or_else(|| map.get("type"));
        if check {
            self.check(map, ptr, ty)?;
        }
        let branch = select(map, ty);
        match branch {
            Branch::Ref(reference) => {
                let rule = self.reference(reference, &child(ptr, "$ref"))?;
                Ok(self.rules.add(&rule_name, &rule))
            }
            Branch::Union(key) => self.union(map, key, ptr, name, &rule_name),
            Branch::TypeUnion(types) => {
                let mut names = Vec::with_capacity(types.len());
                for (i, t) in types.iter().enumerate() {
                    let sub = union_name(name, i);
                    names.push(self.visit(schema, ptr, &sub, Some(t), false)?);
                }
                Ok(self.rules.add(&rule_name, &names.join(" | ")))
            }
            Branch::Const | Branch::Enum => self.constants(map, ptr, &rule_name),
            Branch::Object => {
                let rule = self.object(map, ptr, name)?;
                Ok(self.rules.add(&rule_name, &rule))
            }
            Branch::AllOf => self.all_of(map, ptr, name, &rule_name),
            Branch::Array => self.array(map, ptr, name, &rule_name),
            Branch::Pattern | Branch::Uuid(_) | Branch::Format(_) | Branch::StringLength | Branch::IntRange => {
                self.scalar(map, branch, ptr, &rule_name)
            }
            Branch::AnyObject => {
                let object = self.rules.add_primitive("object");
                Ok(self.rules.add(&rule_name, &object))
            }
            Branch::AnyValue => {
                let value = self.rules.add_primitive("value");
                Ok(self.rules.add(&rule_name, &value))
            }
            Branch::Primitive(t) => {
                let builtin = rules::primitive(t).expect("a primitive type");
                let as_name = if rule_name == "root" { "root" } else { t };
                Ok(self.rules.add_builtin(as_name, builtin))
            }
            Branch::Unrecognized => Err(SchemaError::invalid(&child(ptr, "type"), "not a JSON Schema type")),
        }
    }

    /// The rule for `oneOf` / `anyOf`: the alternatives.
    fn union(
        &mut self,
        map: &'v Map<String, Value>,
        key: &str,
        ptr: &str,
        name: &str,
        rule_name: &str,
    ) -> Result<String> {
        let at = child(ptr, key);
        let alternatives = match map.get(key) {
            Some(Value::Array(a)) if !a.is_empty() => a,
            _ => {
                return Err(SchemaError::invalid(&at, format!("`{key}` must be a non-empty array of schemas")));
            }
        };
        let mut names = Vec::with_capacity(alternatives.len());
        for (i, alternative) in alternatives.iter().enumerate() {
            let sub = union_name(name, i);
            names.push(self.visit(alternative, &index(&at, i), &sub, None, true)?);
        }
        Ok(self.rules.add(rule_name, &names.join(" | ")))
    }

    /// The rule for `const` or `enum`: the values' JSON text as literals.
    fn constants(&mut self, map: &Map<String, Value>, ptr: &str, rule_name: &str) -> Result<String> {
        if let Some(value) = map.get("const") {
            let text = format!("{} space", literal(&dump(value)));
            return Ok(self.rules.add(rule_name, &text));
        }
        let values = match map.get("enum") {
            Some(Value::Array(values)) if !values.is_empty() => values,
            _ => {
                return Err(SchemaError::invalid(&child(ptr, "enum"), "`enum` must be a non-empty array"));
            }
        };
        let alternatives: Vec<String> = values.iter().map(|v| literal(&dump(v))).collect();
        let text = format!("({}) space", alternatives.join(" | "));
        Ok(self.rules.add(rule_name, &text))
    }

    /// The rules that refer to no other schema: pattern, formats, string lengths, integer
    /// bounds.
    fn scalar(&mut self, map: &Map<String, Value>, branch: Branch<'_>, ptr: &str, rule_name: &str) -> Result<String> {
        match branch {
            Branch::Pattern => {
                let at = child(ptr, "pattern");
                let Some(text) = map.get("pattern").and_then(Value::as_str) else {
                    return Err(SchemaError::invalid(&at, "`pattern` must be a string"));
                };
                pattern::translate(text, rule_name, &mut self.rules).map_err(|e| SchemaError::Pattern {
                    pointer: at,
                    pattern: text.to_owned(),
                    offset: e.offset,
                    message: e.message,
                })
            }
            Branch::Uuid(format) => {
                let uuid = rules::primitive("uuid").expect("the uuid rule");
                let as_name = if rule_name == "root" { "root" } else { format };
                Ok(self.rules.add_builtin(as_name, uuid))
            }
            Branch::Format(format) => {
                let string_rule = format!("{format}-string");
                let builtin = rules::format_rule(&string_rule).expect("a format rule");
                let rule = self.rules.add_builtin(&string_rule, builtin);
                Ok(self.rules.add(rule_name, &rule))
            }
            Branch::StringLength => {
                let min = match map.get("minLength") {
                    Some(v) => count(v, &child(ptr, "minLength"))?,
                    None => 0,
                };
                let max = match map.get("maxLength") {
                    Some(v) => Some(count(v, &child(ptr, "maxLength"))?),
                    None => None,
                };
                if max.is_some_and(|m| m < min) {
                    return Err(SchemaError::invalid(
                        &child(ptr, "minLength"),
                        "`minLength` exceeds `maxLength`: no string matches",
                    ));
                }
                let char_rule = self.rules.add_primitive("char");
                let text = format!("\"\\\"\" {} \"\\\"\" space", repetition(&char_rule, min, max, ""));
                Ok(self.rules.add(rule_name, &text))
            }
            Branch::IntRange => {
                let (min, max) = integer_bounds(map, ptr)?;
                let text = format!("({}) space", int_range(min, max));
                Ok(self.rules.add(rule_name, &text))
            }
            _ => unreachable!("not a scalar rule"),
        }
    }

    /// The rule name for a reference: the referenced schema's rule, built on first use; a
    /// reference back to one being built is recursion, fine as long as the reference can
    /// produce a value at all (not when it only leads back to itself).
    fn reference(&mut self, reference: &str, at: &str) -> Result<String> {
        let (target, target_ptr) = self.target(reference, at)?;
        let fragment = reference.split_once('#').map_or(reference, |(_, f)| f);
        let ref_name = format!("ref{}", rules::sanitize(fragment));
        if self.rules.contains(&ref_name) {
            return Ok(ref_name);
        }
        let empty_cycle =
            || SchemaError::reference(at, reference, "can never produce a value: it only leads back to itself");
        if self.resolving.contains(reference) {
            if self.ref_types.get(reference).is_none_or(|t| t.is_empty()) {
                return Err(empty_cycle());
            }
            return Ok(ref_name);
        }
        self.resolving.insert(reference.to_owned());
        let built = self.visit(target, &target_ptr, &ref_name, None, true);
        self.resolving.remove(reference);
        let built = built?;
        if self.ref_types.get(reference).is_none_or(|t| t.is_empty()) {
            return Err(empty_cycle());
        }
        Ok(built)
    }

    /// An object rule from `properties`, `required` and `additionalProperties`.
    fn object(&mut self, map: &'v Map<String, Value>, ptr: &str, name: &str) -> Result<String> {
        let mut properties = Vec::new();
        if let Some(props) = map.get("properties") {
            let at = child(ptr, "properties");
            let Value::Object(props) = props else {
                return Err(SchemaError::invalid(&at, "`properties` must be an object"));
            };
            for (key, schema) in props {
                properties.push((key.as_str(), schema, child(&at, key)));
            }
        }
        let mut required = HashSet::new();
        if let Some(list) = map.get("required") {
            let at = child(ptr, "required");
            let Value::Array(list) = list else {
                return Err(SchemaError::invalid(&at, "`required` must be an array of strings"));
            };
            for (i, item) in list.iter().enumerate() {
                let Some(key) = item.as_str() else {
                    return Err(SchemaError::invalid(&index(&at, i), "`required` must be an array of strings"));
                };
                if !properties.iter().any(|(k, _, _)| *k == key) {
                    return Err(SchemaError::unsupported(
                        &index(&at, i),
                        format!(
                            "the required property `{key}` is not in `properties`: the \
                             converter only generates listed properties"
                        ),
                    ));
                }
                required.insert(key);
            }
        }
        let additional = match map.get("additionalProperties") {
            None | Some(Value::Bool(false)) => None,
            Some(a @ (Value::Bool(true) | Value::Object(_))) => Some((a, child(ptr, "additionalProperties"))),
            Some(_) => {
                return Err(SchemaError::invalid(
                    &child(ptr, "additionalProperties"),
                    "`additionalProperties` must be a boolean or a schema",
                ));
            }
        };
        self.object_rule(&properties, &required, name, additional)
    }

    /// The object rule: the required properties in order, then the optional ones (and the
    /// additional ones, last) in order, any subset of them.
    fn object_rule(
        &mut self,
        properties: &[(&'v str, &'v Value, String)],
        required: &HashSet<&str>,
        name: &str,
        additional: Option<(&'v Value, String)>,
    ) -> Result<String> {
        let prefix = |s: &str| {
            if name.is_empty() { s.to_owned() } else { format!("{name}-{s}") }
        };
        let mut required_keys: Vec<&str> = Vec::new();
        let mut optional_keys: Vec<&str> = Vec::new();
        let mut kv_rules: HashMap<&str, String> = HashMap::new();
        for (key, schema, at) in properties {
            if *key == "*" && (additional.is_some() || !required.contains(key)) {
                return Err(SchemaError::unsupported(
                    at,
                    "an optional property named `*` is not supported (llama.cpp's converter \
                     uses `*` for additional properties)",
                ));
            }
            let sub = prefix(key);
            let value_rule = self.visit(schema, at, &sub, None, true)?;
            let kv_body = format!("{} space \":\" space {value_rule}", literal(&dump_string(key)));
            let kv = self.rules.add(&format!("{sub}-kv"), &kv_body);
            kv_rules.insert(key, kv);
            if required.contains(key) {
                required_keys.push(key);
            } else {
                optional_keys.push(key);
            }
        }
        if let Some((schema, at)) = additional {
            let sub = prefix("additional");
            let value_rule = if schema.is_object() {
                self.visit(schema, &at, &format!("{sub}-value"), None, true)?
            } else {
                self.rules.add_primitive("value")
            };
            let key_rule = if properties.is_empty() {
                self.rules.add_primitive("string")
            } else {
                let keys: Vec<&str> = properties.iter().map(|(k, _, _)| *k).collect();
                if let Some((_, _, at)) =
                    properties.iter().find(|(k, _, _)| k.chars().any(|c| c == '"' || c == '\\' || u32::from(c) < 0x20))
                {
                    return Err(SchemaError::unsupported(
                        at,
                        "with additional properties allowed, property names that need escaping \
                         in JSON (`\"`, `\\`, control characters) are not supported",
                    ));
                }
                let body = self.not_strings(&keys);
                self.rules.add(&format!("{sub}-k"), &body)
            };
            let kv = self.rules.add(&format!("{sub}-kv"), &format!("{key_rule} \":\" space {value_rule}"));
            kv_rules.insert("*", kv);
            optional_keys.push("*");
        }

        let mut rule = String::from("\"{\" space ");
        let required_part: Vec<&str> = required_keys.iter().map(|k| kv_rules[k].as_str()).collect();
        rule.push_str(&required_part.join(" \",\" space "));
        if !optional_keys.is_empty() {
            rule.push_str(" (");
            if !required_keys.is_empty() {
                rule.push_str(" \",\" space ( ");
            }
            let alternatives = self.optional_alternatives(&optional_keys, &kv_rules, name);
            rule.push_str(&alternatives.join(" | "));
            if !required_keys.is_empty() {
                rule.push_str(" )");
            }
            rule.push_str(" )?");
        }
        rule.push_str(" \"}\" space");
        Ok(rule)
    }

    /// The alternatives for the optional properties: for each key, that key and then any of
    /// the keys after it, in order. The keys after key `i` are the rule `<key i>-rest`: an
    /// optional comma and key `i + 1`, then `<key i + 1>-rest` (the additional properties, `*`,
    /// come last and repeat). Built from the last key back, as llama.cpp's recursion adds them.
    fn optional_alternatives(&mut self, keys: &[&str], kv_rules: &HashMap<&str, String>, name: &str) -> Vec<String> {
        let head = |key: &str, first_optional: bool| {
            let kv = &kv_rules[key];
            let comma_kv = format!("( \",\" space {kv} )");
            match (first_optional, key == "*") {
                (true, true) => format!("{comma_kv}*"),
                (true, false) => format!("{comma_kv}?"),
                (false, true) => format!("{kv} {comma_kv}*"),
                (false, false) => kv.clone(),
            }
        };
        // rest[j]: the rule for the keys from `j` on, after key `j - 1`.
        let mut rest: Vec<Option<String>> = vec![None; keys.len() + 1];
        for j in (1..keys.len()).rev() {
            let mut body = head(keys[j], true);
            if let Some(next) = &rest[j + 1] {
                body.push(' ');
                body.push_str(next);
            }
            let before = keys[j - 1];
            let rest_name = if name.is_empty() { format!("{before}-rest") } else { format!("{name}-{before}-rest") };
            rest[j] = Some(self.rules.add(&rest_name, &body));
        }
        (0..keys.len())
            .map(|i| {
                let mut alternative = head(keys[i], false);
                if let Some(next) = &rest[i + 1] {
                    alternative.push(' ');
                    alternative.push_str(next);
                }
                alternative
            })
            .collect()
    }

    /// A JSON string that is none of `keys` (for the names of additional properties): a trie of
    /// the keys, each branch leaving as soon as the string differs from every key. (Built in an
    /// arena and written with an explicit stack: a long key makes a deep trie.)
    fn not_strings(&mut self, keys: &[&str]) -> String {
        #[derive(Default)]
        struct Node {
            children: BTreeMap<char, usize>,
            end: bool,
        }
        enum Task {
            Text(String),
            Node(usize),
        }
        let mut nodes = vec![Node::default()];
        for key in keys {
            let mut at = 0;
            for c in key.chars() {
                at = match nodes[at].children.get(&c) {
                    Some(&next) => next,
                    None => {
                        nodes.push(Node::default());
                        let next = nodes.len() - 1;
                        nodes[at].children.insert(c, next);
                        next
                    }
                };
            }
            nodes[at].end = true;
        }
        let char_rule = self.rules.add_primitive("char");
        let mut out = String::from("[\"] ( ");
        let mut tasks = vec![Task::Node(0)];
        while let Some(task) = tasks.pop() {
            let node = match task {
                Task::Text(text) => {
                    out.push_str(&text);
                    continue;
                }
                Task::Node(node) => &nodes[node],
            };
            // This node's text, in order; pushed reversed onto the stack.
            let mut parts: Vec<Task> = Vec::new();
            let mut rejects: Vec<char> = Vec::new();
            for (i, (&c, &next)) in node.children.iter().enumerate() {
                rejects.push(c);
                let mut text = String::new();
                if i > 0 {
                    text.push_str(" | ");
                }
                text.push('[');
                push_class_char(&mut text, c, true);
                text.push(']');
                if !nodes[next].children.is_empty() {
                    text.push_str(" (");
                    parts.push(Task::Text(text));
                    parts.push(Task::Node(next));
                    parts.push(Task::Text(")".to_owned()));
                } else {
                    if nodes[next].end {
                        text.push(' ');
                        text.push_str(&char_rule);
                        text.push('+');
                    }
                    parts.push(Task::Text(text));
                }
            }
            if !rejects.is_empty() {
                let mut text = String::from(" | [^\"");
                for (i, &c) in rejects.iter().enumerate() {
                    push_class_char(&mut text, c, i + 1 == rejects.len());
                }
                text.push_str("] ");
                text.push_str(&char_rule);
                text.push('*');
                parts.push(Task::Text(text));
            }
            tasks.extend(parts.into_iter().rev());
        }
        out.push_str(" )");
        if !nodes[0].end {
            out.push('?');
        }
        out.push_str(" [\"] space");
        out
    }

    /// The list rule (`items` a schema), or the tuple rule (`items` or `prefixItems` an array).
    fn array(&mut self, map: &'v Map<String, Value>, ptr: &str, name: &str, rule_name: &str) -> Result<String> {
        let prefix = |s: &str| {
            if name.is_empty() { s.to_owned() } else { format!("{name}-{s}") }
        };
        let min_items = match map.get("minItems") {
            Some(v) => Some(count(v, &child(ptr, "minItems"))?),
            None => None,
        };
        let max_items = match map.get("maxItems") {
            Some(v) => Some(count(v, &child(ptr, "maxItems"))?),
            None => None,
        };
        if let (Some(lo), Some(hi)) = (min_items, max_items)
            && lo > hi
        {
            return Err(SchemaError::invalid(
                &child(ptr, "minItems"),
                "`minItems` exceeds `maxItems`: no array matches",
            ));
        }
        // llama.cpp reads `items` when present, else `prefixItems` (either as a list or, as the
        // older `items`, as the schema of every item). An array `prefixItems` closed or left
        // open by `items` (false, true, {}) is its tuple.
        let (items, key) = match (map.get("items"), map.get("prefixItems")) {
            (Some(items), Some(prefix_items @ Value::Array(_))) if tuple_closed_by(items) => {
                (prefix_items, "prefixItems")
            }
            (Some(items), _) => (items, "items"),
            (None, Some(prefix_items)) => (prefix_items, "prefixItems"),
            (None, None) => unreachable!("the array rule needs items or prefixItems"),
        };
        let at = child(ptr, key);
        if let Value::Array(tuple) = items {
            let n = tuple.len() as u32;
            if min_items.is_some_and(|m| m > n) {
                return Err(SchemaError::unsupported(
                    &child(ptr, "minItems"),
                    format!("`minItems` above the {n} items of the tuple is not supported"),
                ));
            }
            if max_items.is_some_and(|m| m < n) {
                return Err(SchemaError::unsupported(
                    &child(ptr, "maxItems"),
                    format!(
                        "`maxItems` below the {n} items of the tuple is not supported (the \
                         converter always generates every item)"
                    ),
                ));
            }
            let mut parts = Vec::with_capacity(tuple.len());
            for (i, item) in tuple.iter().enumerate() {
                let sub = prefix(&format!("tuple-{i}"));
                parts.push(self.visit(item, &index(&at, i), &sub, None, true)?);
            }
            let text = format!("\"[\" space {} \"]\" space", parts.join(" \",\" space "));
            return Ok(self.rules.add(rule_name, &text));
        }
        if items == &Value::Bool(false) {
            return Err(SchemaError::unsupported(
                &at,
                "`items: false` without an array `prefixItems` is not supported",
            ));
        }
        let item_rule = self.visit(items, &at, &prefix("item"), None, true)?;
        let text = format!(
            "\"[\" space {} \"]\" space",
            repetition(&item_rule, min_items.unwrap_or(0), max_items, "\",\" space")
        );
        Ok(self.rules.add(rule_name, &text))
    }

    // ---- allOf -------------------------------------------------------------------------

    /// What llama.cpp makes of the `allOf` of `map`: its components in the order it reads them,
    /// and the enum values they share.
    fn plan_all_of(&self, map: &'v Map<String, Value>, ptr: &str) -> Result<AllOfPlan<'v>> {
        let at = child(ptr, "allOf");
        let Some(Value::Array(elements)) = map.get("allOf") else {
            return Err(SchemaError::invalid(&at, "`allOf` must be an array of schemas"));
        };
        let mut plan = AllOfPlan { components: Vec::new(), enum_counts: BTreeMap::new(), intersection: Vec::new() };
        for (i, element) in elements.iter().enumerate() {
            let element_at = index(&at, i);
            match element.get("anyOf") {
                Some(alternatives) => {
                    let any_at = child(&element_at, "anyOf");
                    let Value::Array(alternatives) = alternatives else {
                        return Err(SchemaError::invalid(&any_at, "`anyOf` must be an array"));
                    };
                    for (j, alternative) in alternatives.iter().enumerate() {
                        self.component(alternative, index(&any_at, j), i, false, &mut plan, 0)?;
                    }
                }
                None => self.component(element, element_at, i, true, &mut plan, 0)?,
            }
        }
        plan.intersection = plan
            .enum_counts
            .iter()
            .filter(|(_, (n, _))| *n == elements.len())
            .map(|(text, (_, v))| (text.clone(), *v))
            .collect();
        Ok(plan)
    }

    fn component(
        &self,
        schema: &'v Value,
        pointer: String,
        element: usize,
        direct: bool,
        plan: &mut AllOfPlan<'v>,
        hops: usize,
    ) -> Result<()> {
        if let Some(r) = schema.get("$ref") {
            let at = child(&pointer, "$ref");
            let reference = r.as_str().unwrap_or_default();
            if hops > self.refs.len() {
                return Err(SchemaError::reference(&at, reference, "only refers back to itself"));
            }
            if let Some(map) = schema.as_object() {
                only_keyword(map, &pointer, "$ref", "next to `$ref` in an `allOf` component")?;
            }
            let (target, target_ptr) = self.target(reference, &at)?;
            return self.component(target, target_ptr, element, direct, plan, hops + 1);
        }
        let kind = if schema.get("properties").is_some() {
            ComponentKind::Properties
        } else if let Some(values) = schema.get("enum") {
            for v in values.as_array().into_iter().flatten() {
                let entry = plan.enum_counts.entry(literal(&dump(v))).or_insert((0, v));
                entry.0 += 1;
            }
            ComponentKind::Enum
        } else {
            ComponentKind::Other
        };
        plan.components.push(Component { schema, pointer, element, direct, kind });
        Ok(())
    }

    /// The `allOf` rule: the shared enum values, or an object with every component's
    /// properties (those of direct components required, those inside `anyOf` optional).
    fn all_of(&mut self, map: &'v Map<String, Value>, ptr: &str, name: &str, rule_name: &str) -> Result<String> {
        let plan = self.plan_all_of(map, ptr)?;
        self.check_all_of(map, ptr, &plan)?;
        if !plan.intersection.is_empty() {
            let values: Vec<&str> = plan.intersection.iter().map(|(t, _)| t.as_str()).collect();
            return Ok(self.rules.add(rule_name, &format!("({}) space", values.join(" | "))));
        }
        let mut properties = Vec::new();
        let mut required = HashSet::new();
        for component in &plan.components {
            if component.kind != ComponentKind::Properties {
                continue;
            }
            let at = child(&component.pointer, "properties");
            let Some(Value::Object(props)) = component.schema.get("properties") else {
                return Err(SchemaError::invalid(&at, "`properties` must be an object"));
            };
            for (key, schema) in props {
                properties.push((key.as_str(), schema, child(&at, key)));
                if component.direct {
                    required.insert(key.as_str());
                }
            }
        }
        let rule = self.object_rule(&properties, &required, name, None)?;
        Ok(self.rules.add(rule_name, &rule))
    }

    /// Checks that the `allOf` rule llama.cpp builds matches what the components ask for.
    fn check_all_of(&self, map: &'v Map<String, Value>, ptr: &str, plan: &AllOfPlan<'v>) -> Result<()> {
        let elements = map["allOf"].as_array().map_or(0, Vec::len);
        let enum_result = !plan.intersection.is_empty();
        let produced = if enum_result {
            plan.intersection.iter().fold(Types::EMPTY, |acc, (_, v)| acc | value_type(v))
        } else {
            Types::OBJECT
        };
        // An element with `anyOf`: only the alternatives are read.
        for (i, element) in map["allOf"].as_array().into_iter().flatten().enumerate() {
            if let Some(element_map) = element.as_object()
                && element_map.contains_key("anyOf")
            {
                let at = index(&child(ptr, "allOf"), i);
                only_keyword(element_map, &at, "anyOf", "next to `anyOf` inside `allOf`")?;
            }
        }
        let property_components = plan.components.iter().filter(|c| c.kind == ComponentKind::Properties).count();
        let mut seen: HashMap<&str, &str> = HashMap::new();
        for component in &plan.components {
            let at = &component.pointer;
            // An alternative of an `anyOf` need not hold when another one does (checked below
            // for objects; by the value check for enums).
            if !component.direct && component.kind == ComponentKind::Other {
                continue;
            }
            let Some(cmap) = component.schema.as_object() else {
                if component.schema != &Value::Bool(true) {
                    return Err(SchemaError::unsupported(at, "an `allOf` component must be an object schema"));
                }
                continue;
            };
            match component.kind {
                ComponentKind::Properties => {
                    if enum_result {
                        return Err(SchemaError::unsupported(
                            at,
                            "`allOf` mixing `properties` with `enum` components is not supported",
                        ));
                    }
                    let props = cmap["properties"].as_object();
                    for key in props.into_iter().flatten().map(|(k, _)| k.as_str()) {
                        if let Some(first) = seen.insert(key, at) {
                            return Err(SchemaError::unsupported(
                                &child(&child(at, "properties"), key),
                                format!(
                                    "the property `{key}` is also defined at {first}: merging \
                                     property schemas across `allOf` is not supported"
                                ),
                            ));
                        }
                    }
                    for (keyword, value) in cmap {
                        let kat = child(at, keyword);
                        match keyword.as_str() {
                            "properties" => {}
                            "required" => {
                                let Some(list) = value.as_array() else {
                                    return Err(SchemaError::invalid(&kat, "`required` must be an array of strings"));
                                };
                                for (i, item) in list.iter().enumerate() {
                                    let key = item.as_str().unwrap_or_default();
                                    if !component.direct {
                                        return Err(SchemaError::unsupported(
                                            &index(&kat, i),
                                            "`required` inside an `anyOf` within `allOf` is not \
                                             supported (those properties are all optional)",
                                        ));
                                    }
                                    if !props.is_some_and(|p| p.contains_key(key)) {
                                        return Err(SchemaError::unsupported(
                                            &index(&kat, i),
                                            format!(
                                                "the required property `{key}` is not in this \
                                                 component's `properties`"
                                            ),
                                        ));
                                    }
                                }
                            }
                            "additionalProperties" => {
                                if value != &Value::Bool(true) && property_components > 1 {
                                    return Err(SchemaError::unsupported(
                                        &kat,
                                        "`additionalProperties` in an `allOf` component whose \
                                         object takes properties from other components is not \
                                         supported",
                                    ));
                                }
                            }
                            _ => component_keyword(keyword, value, &kat, Types::OBJECT)?,
                        }
                    }
                }
                ComponentKind::Enum => {
                    if !enum_result {
                        return Err(SchemaError::unsupported(
                            &child(at, "enum"),
                            "no value is common to every `enum` of this `allOf` (or `enum` is \
                             mixed with other components): not supported",
                        ));
                    }
                    let own = cmap
                        .get("enum")
                        .and_then(Value::as_array)
                        .map(|values| values.iter().fold(Types::EMPTY, |acc, v| acc | value_type(v)))
                        .unwrap_or_default();
                    for (keyword, value) in cmap {
                        if keyword != "enum" {
                            component_keyword(keyword, value, &child(at, keyword), own)?;
                        }
                    }
                }
                ComponentKind::Other => {
                    for (keyword, value) in cmap {
                        component_keyword(keyword, value, &child(at, keyword), produced)?;
                    }
                }
            }
        }
        if !enum_result {
            // Each `anyOf` element holds for every generated object through an alternative
            // with properties (none is required, and there are no other restrictions).
            for element in 0..elements {
                let alternatives: Vec<&Component<'v>> =
                    plan.components.iter().filter(|c| c.element == element && !c.direct).collect();
                if !alternatives.is_empty() && !alternatives.iter().any(|c| c.kind == ComponentKind::Properties) {
                    return Err(SchemaError::unsupported(
                        &child(&index(&child(ptr, "allOf"), element), "anyOf"),
                        "an `anyOf` inside `allOf` without an alternative with `properties` is \
                         not supported (llama.cpp ignores its alternatives)",
                    ));
                }
            }
        }
        if enum_result {
            // Each value must be listed by every element (the counts can mislead when an
            // element lists a value twice, or several alternatives of one `anyOf` list it).
            for element in 0..elements {
                let listed: Vec<&Component<'v>> =
                    plan.components.iter().filter(|c| c.element == element && c.kind == ComponentKind::Enum).collect();
                for (text, value) in &plan.intersection {
                    let in_element = listed.iter().any(|c| {
                        c.schema["enum"].as_array().is_some_and(|vs| vs.iter().any(|v| &literal(&dump(v)) == text))
                    });
                    if !in_element {
                        return Err(SchemaError::unsupported(
                            &index(&child(ptr, "allOf"), element),
                            format!(
                                "the value {} is not listed by this `allOf` element: \
                                 llama.cpp's enum intersection would be wrong",
                                dump(value)
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Checks a keyword of an `allOf` component that llama.cpp does not read: harmless only if it
/// constrains nothing or only types other than `produced`.
fn component_keyword(keyword: &str, value: &Value, at: &str, produced: Types) -> Result<()> {
    match keywords::kind(keyword) {
        Kind::Annotation | Kind::Unknown => Ok(()),
        _ if keywords::is_no_op(keyword, value) => Ok(()),
        Kind::Only(only) if !only.intersects(produced) => Ok(()),
        _ if keyword == "type" => {
            let declared = Converter::declared_types(value, at)?;
            if produced.is_subset(declared) {
                Ok(())
            } else {
                Err(SchemaError::unsupported(
                    at,
                    format!(
                        "`type` of an `allOf` component is not enforced: the rule can also \
                         produce {}",
                        produced.minus(declared).describe()
                    ),
                ))
            }
        }
        _ => Err(SchemaError::unsupported(
            at,
            format!("`{keyword}` in an `allOf` component is ignored by the converter: not supported"),
        )),
    }
}

/// Checks that `map` has no constraining keyword but `keyword`.
fn only_keyword(map: &Map<String, Value>, at: &str, keyword: &str, context: &str) -> Result<()> {
    for (k, v) in map {
        if k == keyword || matches!(keywords::kind(k), Kind::Annotation | Kind::Unknown) || keywords::is_no_op(k, v) {
            continue;
        }
        return Err(SchemaError::unsupported(
            &child(at, k),
            format!("`{k}` {context} is ignored by the converter: not supported"),
        ));
    }
    Ok(())
}

/// Why a keyword the chosen rule does not apply is refused.
fn ignored_message(keyword: &str, branch: Branch<'_>, ty: Option<&Value>) -> String {
    if keywords::never_applied(keyword) {
        return format!("`{keyword}` is not supported: the converter cannot express it");
    }
    let typed = |t: &str| is_type(ty, t);
    match keyword {
        "minLength" | "maxLength" if !typed("string") => {
            format!("`{keyword}` is only supported with `\"type\": \"string\"`")
        }
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" if !typed("integer") => {
            format!("`{keyword}` is only supported with `\"type\": \"integer\"`")
        }
        "minItems" | "maxItems" | "additionalItems" => {
            format!("`{keyword}` is only supported together with `items` or `prefixItems`")
        }
        "required" if !matches!(branch, Branch::Object) => {
            "`required` is only supported together with `properties`".to_owned()
        }
        _ => format!("`{keyword}` is ignored by the converter {}: not supported", branch.context()),
    }
}

/// The name of the `i`-th alternative of a union named `name`.
fn union_name(name: &str, i: usize) -> String {
    if name.is_empty() { format!("alternative-{i}") } else { format!("{name}-{i}") }
}

/// A class character for the trie of `not_strings`: `]`, `\` and `^` escaped, `-` escaped
/// unless it ends the class (where it cannot start a range).
fn push_class_char(out: &mut String, c: char, last: bool) {
    match c {
        ']' => out.push_str("\\]"),
        '\\' => out.push_str("\\\\"),
        '^' if last => out.push_str("\\x5E"),
        '-' if !last => out.push_str("\\-"),
        c => out.push(c),
    }
}

/// A count keyword (`minLength`, `maxItems`, ...): a non-negative integer below 2^31 - 1.
fn count(value: &Value, at: &str) -> Result<u32> {
    let n = match value {
        Value::Number(n) => {
            n.as_u64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64))
        }
        _ => None,
    };
    match n {
        Some(n) if n < i32::MAX as u64 => Ok(n as u32),
        Some(_) => Err(SchemaError::unsupported(at, "counts of 2^31 - 1 or more are not supported")),
        None => Err(SchemaError::invalid(at, "must be a non-negative integer")),
    }
}

/// The inclusive integer bounds of an integer schema. Fractional bounds round inwards, and
/// `minimum` with `exclusiveMinimum` (or the maxima) take the tighter (where llama.cpp
/// truncates, and reads only `minimum`).
fn integer_bounds(map: &Map<String, Value>, ptr: &str) -> Result<(Option<i64>, Option<i64>)> {
    // Each keyword: how an integer value and a fractional value become an inclusive bound.
    type Rule = (&'static str, fn(i64) -> Option<i64>, fn(f64) -> f64);
    const LOWER: [Rule; 2] =
        [("minimum", Some, f64::ceil), ("exclusiveMinimum", |v| v.checked_add(1), |f| f.floor() + 1.0)];
    const UPPER: [Rule; 2] =
        [("maximum", Some, f64::floor), ("exclusiveMaximum", |v| v.checked_sub(1), |f| f.ceil() - 1.0)];
    let read = |(keyword, int, float): Rule| -> Result<Option<(i64, String)>> {
        let Some(value) = map.get(keyword) else {
            return Ok(None);
        };
        let at = child(ptr, keyword);
        let out_of_range = || SchemaError::unsupported(&at, "integer bounds beyond ±(2^63 - 2) are not supported");
        let n = match value {
            Value::Number(n) => n,
            Value::Bool(_) => {
                return Err(SchemaError::unsupported(
                    &at,
                    format!(
                        "the draft-4 boolean `{keyword}` is not supported; give the bound as a \
                         number"
                    ),
                ));
            }
            _ => return Err(SchemaError::invalid(&at, "must be a number")),
        };
        let bound = if let Some(i) = n.as_i64() {
            int(i).ok_or_else(out_of_range)?
        } else if n.is_u64() {
            return Err(out_of_range());
        } else {
            let f = float(n.as_f64().unwrap_or(f64::NAN));
            if !f.is_finite() || f.abs() >= 9.2e18 {
                return Err(out_of_range());
            }
            f as i64
        };
        if bound == i64::MIN || bound == i64::MAX {
            return Err(out_of_range());
        }
        Ok(Some((bound, at)))
    };
    let mut lower: Option<(i64, String)> = None;
    for rule in LOWER {
        if let Some(b) = read(rule)?
            && lower.as_ref().is_none_or(|(v, _)| b.0 > *v)
        {
            lower = Some(b);
        }
    }
    let mut upper: Option<(i64, String)> = None;
    for rule in UPPER {
        if let Some(b) = read(rule)?
            && upper.as_ref().is_none_or(|(v, _)| b.0 < *v)
        {
            upper = Some(b);
        }
    }
    match (&lower, &upper) {
        (Some((lo, at)), Some((hi, _))) if lo > hi => {
            return Err(SchemaError::invalid(at, "no integer lies within the bounds"));
        }
        (Some((lo, at)), None) if *lo > MAX_HALF_OPEN_BOUND => {
            return Err(SchemaError::unsupported(
                at,
                "a lower bound above 10^15 - 1 without an upper bound is not supported",
            ));
        }
        (None, Some((hi, at))) if *hi < -MAX_HALF_OPEN_BOUND => {
            return Err(SchemaError::unsupported(
                at,
                "an upper bound below -(10^15 - 1) without a lower bound is not supported",
            ));
        }
        _ => {}
    }
    Ok((lower.map(|(v, _)| v), upper.map(|(v, _)| v)))
}
