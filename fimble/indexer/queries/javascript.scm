; JavaScript (and JSX): functions, classes, methods, top-level bindings, ES and CommonJS imports.

(function_declaration
  name: (identifier) @name
  body: (statement_block) @body) @def.function

(generator_function_declaration
  name: (identifier) @name
  body: (statement_block) @body) @def.function

(class_declaration
  name: (identifier) @name
  body: (class_body) @body) @def.class

(method_definition
  name: (_) @name
  body: (statement_block) @body) @def.method

; Bindings and imports: ecmascript.scm.
