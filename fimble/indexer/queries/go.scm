; Go: functions, methods (scoped by receiver type), types, top-level const/var, imports.

(function_declaration
  name: (identifier) @name
  body: (block) @body) @def.function

(function_declaration
  name: (identifier) @name
  !body) @def.function

(method_declaration
  receiver: (parameter_list
    (parameter_declaration
      type: [
        (type_identifier) @receiver
        (pointer_type (type_identifier) @receiver)
        (generic_type type: (type_identifier) @receiver)
        (pointer_type (generic_type type: (type_identifier) @receiver))
      ]))
  name: (field_identifier) @name
  body: (block)? @body) @def.method

(type_spec
  name: (type_identifier) @name
  type: (struct_type (field_declaration_list) @body)) @def.struct

(type_spec
  name: (type_identifier) @name
  type: (interface_type "{" @body)) @def.interface

(type_spec
  name: (type_identifier) @name
  type: [
    (type_identifier) (qualified_type) (function_type) (map_type) (slice_type) (pointer_type)
    (array_type) (channel_type) (generic_type)
  ]) @def.type

(type_alias
  name: (type_identifier) @name) @def.type

(source_file
  (const_declaration
    (const_spec name: (identifier) @name) @def.constant))

(source_file
  (var_declaration
    (var_spec name: (identifier) @name) @def.variable))

(source_file
  (var_declaration
    (var_spec_list
      (var_spec name: (identifier) @name) @def.variable)))

(import_spec
  name: (_)? @import.name
  path: (_) @import.module) @import
