; C and C++ alike: prototypes, structs/unions/enums, typedefs, macros, file-scope constants, includes.
; Appended to c.scm and cpp.scm (see data/languages.toml), whose function definitions differ (C++
; names them with field identifiers, destructors, operators and Type:: qualifiers).

(declaration
  declarator: (function_declarator declarator: (identifier) @name)) @def.prototype

(declaration
  declarator: (pointer_declarator
    declarator: (function_declarator declarator: (identifier) @name))) @def.prototype

(struct_specifier
  name: (type_identifier) @name
  body: (field_declaration_list) @body) @def.struct

(union_specifier
  name: (type_identifier) @name
  body: (field_declaration_list) @body) @def.struct

(enum_specifier
  name: (type_identifier) @name
  body: (enumerator_list) @body) @def.enum

(type_definition
  declarator: (type_identifier) @name) @def.type

(preproc_def
  name: (identifier) @name
  value: (preproc_arg)) @def.constant

(preproc_function_def
  name: (identifier) @name) @def.macro

; `constexpr` is C23 as well as C++.
(translation_unit
  (declaration
    (type_qualifier) @_const
    declarator: (init_declarator declarator: (identifier) @name)) @def.constant
  (#match? @_const "^(const|constexpr)$"))

(preproc_include
  path: (_) @import.module) @import
