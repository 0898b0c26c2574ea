; C: functions and prototypes, structs/unions/enums, typedefs, macros, file-scope const, includes.

(function_definition
  declarator: (function_declarator declarator: (identifier) @name)
  body: (compound_statement) @body) @def.function

(function_definition
  declarator: (pointer_declarator
    declarator: (function_declarator declarator: (identifier) @name))
  body: (compound_statement) @body) @def.function

(function_definition
  declarator: (pointer_declarator
    declarator: (pointer_declarator
      declarator: (function_declarator declarator: (identifier) @name)))
  body: (compound_statement) @body) @def.function

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

(translation_unit
  (declaration
    (type_qualifier) @_const
    declarator: (init_declarator declarator: (identifier) @name)) @def.constant
  (#eq? @_const "const"))

(preproc_include
  path: (_) @import.module) @import
