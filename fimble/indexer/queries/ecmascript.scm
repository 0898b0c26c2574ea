; JavaScript, TypeScript and TSX alike: top-level bindings and ES/CommonJS imports. Appended to
; javascript.scm and typescript.scm (see data/languages.toml), whose class and function patterns differ
; (TypeScript names classes with type_identifier).

; Top-level bindings: functions when the value is one, else constants (const) or variables (let/var).
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
