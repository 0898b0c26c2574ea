; TypeScript and TSX: everything JavaScript has, plus interfaces, type aliases, enums, namespaces and
; signatures without bodies (abstract methods, overloads, interface methods).

(function_declaration
  name: (identifier) @name
  body: (statement_block) @body) @def.function

(generator_function_declaration
  name: (identifier) @name
  body: (statement_block) @body) @def.function

(function_signature
  name: (identifier) @name) @def.function

(class_declaration
  name: (type_identifier) @name
  body: (class_body) @body) @def.class

(abstract_class_declaration
  name: (type_identifier) @name
  body: (class_body) @body) @def.class

(interface_declaration
  name: (type_identifier) @name
  body: (interface_body) @body) @def.interface

(type_alias_declaration
  name: (type_identifier) @name) @def.type

(enum_declaration
  name: (identifier) @name
  body: (enum_body) @body) @def.enum

(internal_module
  name: (_) @name
  body: (statement_block) @body) @def.module

(method_definition
  name: (_) @name
  body: (statement_block) @body) @def.method

(method_signature
  name: (_) @name) @def.method

(abstract_method_signature
  name: (_) @name) @def.method

; Bindings and imports: ecmascript.scm.
