; Python: functions, classes, module-level names, imports.

(function_definition
  name: (identifier) @name
  body: (block . (expression_statement . (string) @doc)?) @body) @def.function

(class_definition
  name: (identifier) @name
  body: (block . (expression_statement . (string) @doc)?) @body) @def.class

; Module-level assignments: UPPER_CASE names are constants, the rest variables.
(module
  (expression_statement
    (assignment left: (identifier) @name) @def.constant)
  (#match? @name "^_*[A-Z][A-Z0-9_]*$"))

(module
  (expression_statement
    (assignment left: (identifier) @name) @def.variable)
  (#not-match? @name "^_*[A-Z][A-Z0-9_]*$"))

(import_statement
  name: [
    (dotted_name) @import.module
    (aliased_import name: (dotted_name) @import.module)
  ]) @import

(import_from_statement
  module_name: (_) @import.from
  name: [
    (dotted_name) @import.name
    (aliased_import name: (dotted_name) @import.name)
  ]) @import

(import_from_statement
  module_name: (_) @import.from
  (wildcard_import)) @import
