; Rust: functions (methods inside impl/trait), ADTs, traits, aliases, consts/statics, modules, macros,
; and the `use`/`mod` items that point at other files.

(function_item
  name: (identifier) @name
  body: (block) @body) @def.function

(function_signature_item
  name: (identifier) @name) @def.method

(struct_item
  name: (type_identifier) @name
  body: (_)? @body) @def.struct

(union_item
  name: (type_identifier) @name
  body: (_) @body) @def.struct

(enum_item
  name: (type_identifier) @name
  body: (_) @body) @def.enum

(trait_item
  name: (type_identifier) @name
  body: (_) @body) @def.trait

(type_item
  name: (type_identifier) @name) @def.type

(const_item
  name: (identifier) @name) @def.constant

(static_item
  name: (identifier) @name) @def.constant

(mod_item
  name: (identifier) @name
  body: (declaration_list) @body) @def.module

(macro_definition
  name: (identifier) @name) @def.macro

; `impl Type { ... }` and `impl Trait for Type { ... }` scope their functions under Type.
(impl_item
  type: [
    (type_identifier) @name
    (generic_type type: (type_identifier) @name)
    (scoped_type_identifier name: (type_identifier) @name)
  ]
  body: (_) @body) @scope

(mod_item
  name: (identifier) @import.mod
  !body) @import

(use_declaration
  argument: (_) @import.module) @import

(extern_crate_declaration
  name: (identifier) @import.module) @import
