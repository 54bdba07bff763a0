//! Calling any export of any recipe by name, with arguments and results as JSON: the generic
//! `Invoke` of `wazoo serve` and `wazoo call`.
//!
//! The mapping follows the export's WIT types:
//!
//! | WIT                        | JSON                                                        |
//! |----------------------------|-------------------------------------------------------------|
//! | bool, integers, floats     | boolean, number (64-bit integers exactly)                   |
//! | char, string               | string                                                      |
//! | `list<u8>`                 | a string (its UTF-8 bytes); out: a string if the bytes are UTF-8, else an array of numbers; in: either |
//! | `list<T>`, tuple           | array                                                       |
//! | record                     | object keyed by field name (`timeout-ms`; `timeout_ms` also accepted) |
//! | `option<T>`                | `null` or the value                                         |
//! | `result<T, E>`             | `{"ok": T}` or `{"err": E}` (`null` for a missing payload)  |
//! | variant                    | `"case"` without payload, `{"case": payload}` with one      |
//! | enum                       | `"case"`                                                    |
//! | flags                      | array of flag names                                         |
//!
//! Arguments are a JSON array (positional) or an object keyed by parameter name; a missing
//! `option` argument is `none`. Resources, futures and streams are not mapped (recipes use none).

use serde_json::{json, Map, Value as Json};
use wasmtime::component::types::{ComponentFunc, ComponentItem};
use wasmtime::component::{Type, Val};
use wasmtime::Engine;

/// One exported function: its interface (none for a function the world exports directly),
/// its name, and its type.
#[derive(Clone)]
pub struct Export {
    /// Full interface name, e.g. `wazoo:recipes/lock@0.1.2`.
    pub interface: Option<String>,
    pub name: String,
    pub ty: ComponentFunc,
}

impl Export {
    /// What callers write to name it: `lock.acquire`, or `run` for a world-level function.
    pub fn short_name(&self) -> String {
        match &self.interface {
            Some(i) => format!("{}.{}", short_interface(i), self.name),
            None => self.name.clone(),
        }
    }

    /// `lock.acquire(path: string, timeout-ms: option<u64>) -> result<record{…}, variant{…}>`.
    pub fn signature(&self) -> String {
        let params: Vec<String> =
            self.ty.params().map(|(name, ty)| format!("{name}: {}", type_name(&ty))).collect();
        let results: Vec<String> = self.ty.results().map(|ty| type_name(&ty)).collect();
        let mut s = format!("{}({})", self.short_name(), params.join(", "));
        if !results.is_empty() {
            s.push_str(" -> ");
            s.push_str(&results.join(", "));
        }
        s
    }
}

/// `wazoo:recipes/double-barrier@0.1.2` → `double-barrier`.
fn short_interface(full: &str) -> &str {
    let after_slash = full.rsplit('/').next().unwrap_or(full);
    after_slash.split('@').next().unwrap_or(after_slash)
}

/// Every function `component_type` exports, directly or in an exported interface.
pub fn exports(engine: &Engine, component: &wasmtime::component::Component) -> Vec<Export> {
    let mut found = Vec::new();
    for (name, item) in component.component_type().exports(engine) {
        match item.ty {
            ComponentItem::ComponentFunc(ty) => {
                found.push(Export { interface: None, name: name.to_string(), ty })
            }
            ComponentItem::ComponentInstance(instance) => {
                for (fname, fitem) in instance.exports(engine) {
                    if let ComponentItem::ComponentFunc(ty) = fitem.ty {
                        found.push(Export { interface: Some(name.to_string()), name: fname.to_string(), ty });
                    }
                }
            }
            _ => {}
        }
    }
    found
}

/// Finds `wanted` among `exports`: `interface#func` with the full interface name,
/// `short.func` (`lock.acquire`), or a bare function name that only one export has.
pub fn find<'a>(exports: &'a [Export], wanted: &str) -> Result<&'a Export, String> {
    let hits: Vec<&Export> = if let Some((iface, func)) = wanted.split_once('#') {
        exports.iter().filter(|e| e.interface.as_deref() == Some(iface) && e.name == func).collect()
    } else if let Some((iface, func)) = wanted.rsplit_once('.') {
        exports
            .iter()
            .filter(|e| e.name == func && e.interface.as_deref().map(short_interface) == Some(iface))
            .collect()
    } else {
        exports.iter().filter(|e| e.name == wanted).collect()
    };
    match hits.as_slice() {
        [one] => Ok(one),
        [] => Err(format!(
            "no exported function {wanted:?}; it exports: {}",
            exports.iter().map(Export::short_name).collect::<Vec<_>>().join(", ")
        )),
        many => Err(format!(
            "{wanted:?} is ambiguous: {}",
            many.iter().map(|e| e.short_name()).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The arguments of `export` from `args`: a JSON array (positional), an object (by parameter
/// name), or null (no arguments).
pub fn arguments(export: &Export, args: &Json) -> Result<Vec<Val>, String> {
    let params: Vec<(String, Type)> = export.ty.params().map(|(n, t)| (n.to_string(), t)).collect();
    match args {
        Json::Array(items) => {
            if items.len() > params.len() {
                return Err(format!(
                    "{} takes {} arguments, not {}",
                    export.short_name(),
                    params.len(),
                    items.len()
                ));
            }
            params.iter().enumerate().map(|(i, (name, ty))| argument(name, ty, items.get(i))).collect()
        }
        Json::Object(fields) => {
            for key in fields.keys() {
                if !params.iter().any(|(name, _)| same_name(name, key)) {
                    return Err(format!("{} has no parameter {key:?}", export.short_name()));
                }
            }
            params
                .iter()
                .map(|(name, ty)| {
                    let value = fields.iter().find(|(k, _)| same_name(name, k)).map(|(_, v)| v);
                    argument(name, ty, value)
                })
                .collect()
        }
        Json::Null => params.iter().map(|(name, ty)| argument(name, ty, None)).collect(),
        _ => Err("arguments must be a JSON array (positional) or object (by name)".into()),
    }
}

fn argument(name: &str, ty: &Type, value: Option<&Json>) -> Result<Val, String> {
    match (value, ty) {
        (None, Type::Option(_)) => Ok(Val::Option(None)),
        (None, _) => Err(format!("missing argument {name}")),
        (Some(v), _) => to_val(ty, v).map_err(|e| format!("argument {name}: {e}")),
    }
}

/// WIT names are kebab-case; JSON callers may write snake_case.
fn same_name(wit: &str, json: &str) -> bool {
    wit.len() == json.len() && wit.bytes().zip(json.bytes()).all(|(a, b)| a == b || (a == b'-' && b == b'_'))
}

/// A JSON value as a value of type `ty`.
pub fn to_val(ty: &Type, v: &Json) -> Result<Val, String> {
    fn int<T: TryFrom<i64> + TryFrom<u64>>(v: &Json, what: &str) -> Result<T, String> {
        let n = if let Some(n) = v.as_i64() {
            T::try_from(n).ok()
        } else if let Some(n) = v.as_u64() {
            T::try_from(n).ok()
        } else {
            return Err(format!("expected {what}, got {v}"));
        };
        n.ok_or_else(|| format!("{v} does not fit {what}"))
    }
    let expected = |what: &str| format!("expected {what}, got {v}");
    Ok(match ty {
        Type::Bool => Val::Bool(v.as_bool().ok_or_else(|| expected("a boolean"))?),
        Type::S8 => Val::S8(int(v, "s8")?),
        Type::U8 => Val::U8(int(v, "u8")?),
        Type::S16 => Val::S16(int(v, "s16")?),
        Type::U16 => Val::U16(int(v, "u16")?),
        Type::S32 => Val::S32(int(v, "s32")?),
        Type::U32 => Val::U32(int(v, "u32")?),
        Type::S64 => Val::S64(int(v, "s64")?),
        Type::U64 => Val::U64(int(v, "u64")?),
        Type::Float32 => Val::Float32(v.as_f64().ok_or_else(|| expected("a number"))? as f32),
        Type::Float64 => Val::Float64(v.as_f64().ok_or_else(|| expected("a number"))?),
        Type::Char => {
            let s = v.as_str().ok_or_else(|| expected("a one-character string"))?;
            let mut chars = s.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Val::Char(c),
                _ => return Err(expected("a one-character string")),
            }
        }
        Type::String => Val::String(v.as_str().ok_or_else(|| expected("a string"))?.to_string()),
        Type::List(list) => {
            let elem = list.ty();
            match (v, &elem) {
                (Json::String(s), Type::U8) => Val::List(s.bytes().map(Val::U8).collect()),
                (Json::Array(items), _) => {
                    Val::List(items.iter().map(|i| to_val(&elem, i)).collect::<Result<_, _>>()?)
                }
                _ => return Err(expected("an array")),
            }
        }
        Type::Tuple(tuple) => {
            let items = v.as_array().ok_or_else(|| expected("an array"))?;
            let types: Vec<Type> = tuple.types().collect();
            if items.len() != types.len() {
                return Err(format!("expected {} tuple items, got {}", types.len(), items.len()));
            }
            Val::Tuple(types.iter().zip(items).map(|(t, i)| to_val(t, i)).collect::<Result<_, _>>()?)
        }
        Type::Record(record) => {
            let object = v.as_object().ok_or_else(|| expected("an object"))?;
            let mut fields = Vec::new();
            for field in record.fields() {
                let value = object.iter().find(|(k, _)| same_name(field.name, k)).map(|(_, v)| v);
                fields.push((field.name.to_string(), argument(field.name, &field.ty, value)?));
            }
            Val::Record(fields)
        }
        Type::Variant(variant) => {
            let (case, payload) = one_case(v)?;
            let Some(c) = variant.cases().find(|c| c.name == case) else {
                let cases: Vec<&str> = variant.cases().map(|c| c.name).collect();
                return Err(format!("no case {case:?} (cases: {})", cases.join(", ")));
            };
            let payload = match (&c.ty, payload) {
                (Some(t), Some(p)) => Some(Box::new(to_val(t, p)?)),
                (Some(_), None) => return Err(format!("case {case} needs a payload: {{\"{case}\": …}}")),
                (None, Some(p)) if !p.is_null() => return Err(format!("case {case} takes no payload")),
                (None, _) => None,
            };
            Val::Variant(case.to_string(), payload)
        }
        Type::Enum(e) => {
            let s = v.as_str().ok_or_else(|| expected("a string naming a case"))?;
            if !e.names().any(|n| n == s) {
                return Err(format!("no case {s:?} (cases: {})", e.names().collect::<Vec<_>>().join(", ")));
            }
            Val::Enum(s.to_string())
        }
        Type::Option(o) => match v {
            Json::Null => Val::Option(None),
            _ => Val::Option(Some(Box::new(to_val(&o.ty(), v)?))),
        },
        Type::Result(r) => {
            let (case, payload) = one_case(v)?;
            let side = match case {
                "ok" => r.ok(),
                "err" => r.err(),
                _ => return Err(expected("{\"ok\": …} or {\"err\": …}")),
            };
            let payload = match (side, payload) {
                (Some(t), Some(p)) => Some(Box::new(to_val(&t, p)?)),
                (Some(_), None) => return Err(format!("{case} needs a payload")),
                (None, _) => None,
            };
            Val::Result(if case == "ok" { Ok(payload) } else { Err(payload) })
        }
        Type::Flags(flags) => {
            let items = v.as_array().ok_or_else(|| expected("an array of flag names"))?;
            let mut set = Vec::new();
            for item in items {
                let name = item.as_str().ok_or_else(|| expected("flag names"))?;
                if !flags.names().any(|n| n == name) {
                    return Err(format!("no flag {name:?}"));
                }
                set.push(name.to_string());
            }
            Val::Flags(set)
        }
        other => return Err(format!("{} values cannot be passed as JSON", type_name(other))),
    })
}

/// `"case"` or `{"case": payload}`.
fn one_case(v: &Json) -> Result<(&str, Option<&Json>), String> {
    match v {
        Json::String(s) => Ok((s, None)),
        Json::Object(o) if o.len() == 1 => {
            let (k, p) = o.iter().next().expect("one entry");
            Ok((k, Some(p)))
        }
        _ => Err(format!("expected \"case\" or {{\"case\": payload}}, got {v}")),
    }
}

/// A value of type `ty` as JSON.
pub fn to_json(ty: &Type, v: &Val) -> Json {
    match (ty, v) {
        (_, Val::Bool(b)) => json!(b),
        (_, Val::S8(n)) => json!(n),
        (_, Val::U8(n)) => json!(n),
        (_, Val::S16(n)) => json!(n),
        (_, Val::U16(n)) => json!(n),
        (_, Val::S32(n)) => json!(n),
        (_, Val::U32(n)) => json!(n),
        (_, Val::S64(n)) => json!(n),
        (_, Val::U64(n)) => json!(n),
        (_, Val::Float32(n)) => json!(n),
        (_, Val::Float64(n)) => json!(n),
        (_, Val::Char(c)) => json!(c.to_string()),
        (_, Val::String(s)) => json!(s),
        (Type::List(list), Val::List(items)) => {
            let elem = list.ty();
            if let Type::U8 = elem {
                let bytes: Vec<u8> = items.iter().map(|i| if let Val::U8(b) = i { *b } else { 0 }).collect();
                return match String::from_utf8(bytes) {
                    Ok(text) => json!(text),
                    Err(e) => json!(e.into_bytes()),
                };
            }
            Json::Array(items.iter().map(|i| to_json(&elem, i)).collect())
        }
        (Type::Tuple(tuple), Val::Tuple(items)) => {
            Json::Array(tuple.types().zip(items).map(|(t, i)| to_json(&t, i)).collect())
        }
        (Type::Record(record), Val::Record(fields)) => {
            let mut object = Map::new();
            for (field, (name, value)) in record.fields().zip(fields) {
                object.insert(name.clone(), to_json(&field.ty, value));
            }
            Json::Object(object)
        }
        (Type::Variant(variant), Val::Variant(case, payload)) => {
            let ty = variant.cases().find(|c| c.name == case).and_then(|c| c.ty);
            match (ty, payload) {
                (Some(t), Some(p)) => json!({ case: to_json(&t, p) }),
                _ => json!(case),
            }
        }
        (_, Val::Enum(case)) => json!(case),
        (Type::Option(o), Val::Option(value)) => match value {
            Some(v) => to_json(&o.ty(), v),
            None => Json::Null,
        },
        (Type::Result(r), Val::Result(outcome)) => {
            let (key, ty, payload) = match outcome {
                Ok(p) => ("ok", r.ok(), p),
                Err(p) => ("err", r.err(), p),
            };
            let inner = match (ty, payload) {
                (Some(t), Some(p)) => to_json(&t, p),
                _ => Json::Null,
            };
            json!({ key: inner })
        }
        (_, Val::Flags(set)) => json!(set),
        (_, other) => json!(format!("<{other:?}>")),
    }
}

/// A WIT-like name for `ty`, structural (records and variants are spelled out).
pub fn type_name(ty: &Type) -> String {
    match ty {
        Type::Bool => "bool".into(),
        Type::S8 => "s8".into(),
        Type::U8 => "u8".into(),
        Type::S16 => "s16".into(),
        Type::U16 => "u16".into(),
        Type::S32 => "s32".into(),
        Type::U32 => "u32".into(),
        Type::S64 => "s64".into(),
        Type::U64 => "u64".into(),
        Type::Float32 => "f32".into(),
        Type::Float64 => "f64".into(),
        Type::Char => "char".into(),
        Type::String => "string".into(),
        Type::List(l) => format!("list<{}>", type_name(&l.ty())),
        Type::Tuple(t) => {
            format!("tuple<{}>", t.types().map(|t| type_name(&t)).collect::<Vec<_>>().join(", "))
        }
        Type::Record(r) => format!(
            "record{{{}}}",
            r.fields().map(|f| format!("{}: {}", f.name, type_name(&f.ty))).collect::<Vec<_>>().join(", ")
        ),
        // The shared error type of every recipe, by its cases.
        Type::Variant(v) if v.cases().take(2).map(|c| c.name).eq(["no-node", "node-exists"]) => {
            "zk-error".into()
        }
        Type::Variant(v) => format!(
            "variant{{{}}}",
            v.cases()
                .map(|c| match &c.ty {
                    Some(t) => format!("{}({})", c.name, type_name(t)),
                    None => c.name.to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Type::Enum(e) => format!("enum{{{}}}", e.names().collect::<Vec<_>>().join(", ")),
        Type::Option(o) => format!("option<{}>", type_name(&o.ty())),
        Type::Result(r) => {
            let side = |t: Option<Type>| t.map(|t| type_name(&t)).unwrap_or_else(|| "_".into());
            format!("result<{}, {}>", side(r.ok()), side(r.err()))
        }
        Type::Flags(f) => format!("flags{{{}}}", f.names().collect::<Vec<_>>().join(", ")),
        Type::Own(_) | Type::Borrow(_) => "resource".into(),
        other => format!("{other:?}").to_lowercase(),
    }
}
