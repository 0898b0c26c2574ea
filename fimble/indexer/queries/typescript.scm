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

(program
  (lexical_declaration
    (variable_declarator
      name: (identifier) @name
      value: [
        (arrow_function body: (_) @body)
        (function_expression body: (_) @body)
        (generator_function body: (_) @body)
      ])) @def.function)

(program
  (export_statement
    (lexical_declaration
      (variable_declarator
        name: (identifier) @name
        value: [
          (arrow_function body: (_) @body)
          (function_expression body: (_) @body)
          (generator_function body: (_) @body)
        ])) @def.function))

(program
  (lexical_declaration "const" (variable_declarator name: (identifier) @name)) @def.constant)

(program
  (export_statement
    (lexical_declaration "const" (variable_declarator name: (identifier) @name)) @def.constant))

(program
  [
    (lexical_declaration "let" (variable_declarator name: (identifier) @name))
    (variable_declaration (variable_declarator name: (identifier) @name))
  ] @def.variable)

(import_statement
  source: (string (string_fragment) @import.module)) @import

(import_statement
  (import_clause (named_imports (import_specifier name: (_) @import.name)))
  source: (string (string_fragment) @import.module)) @import

(import_statement
  (import_clause (identifier) @import.name)
  source: (string (string_fragment) @import.module)) @import

(export_statement
  source: (string (string_fragment) @import.module)) @import

(call_expression
  function: (identifier) @_require
  arguments: (arguments . (string (string_fragment) @import.module))
  (#eq? @_require "require")) @import

(call_expression
  function: (import)
  arguments: (arguments . (string (string_fragment) @import.module))) @import
