; C++: C's definitions plus classes, namespaces, methods (in-class, and out-of-class via Type::name),
; aliases and constexpr/const at namespace scope.

(function_definition
  declarator: (function_declarator
    declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name)
  body: (_) @body) @def.function

(function_definition
  declarator: (function_declarator
    declarator: (qualified_identifier scope: (_) @receiver name: (_) @name))
  body: (_) @body) @def.function

(function_definition
  declarator: [
    (pointer_declarator
      declarator: (function_declarator
        declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name))
    (reference_declarator
      (function_declarator
        declarator: [(identifier) (field_identifier) (destructor_name) (operator_name)] @name))
  ]
  body: (_) @body) @def.function

(function_definition
  declarator: [
    (pointer_declarator
      declarator: (function_declarator
        declarator: (qualified_identifier scope: (_) @receiver name: (_) @name)))
    (reference_declarator
      (function_declarator
        declarator: (qualified_identifier scope: (_) @receiver name: (_) @name)))
  ]
  body: (_) @body) @def.function

(field_declaration
  declarator: (function_declarator
    declarator: [(field_identifier) (destructor_name) (operator_name)] @name)) @def.method

(declaration
  declarator: (function_declarator declarator: (identifier) @name)) @def.prototype

(class_specifier
  name: (type_identifier) @name
  body: (field_declaration_list) @body) @def.class

(struct_specifier
  name: (type_identifier) @name
  body: (field_declaration_list) @body) @def.struct

(union_specifier
  name: (type_identifier) @name
  body: (field_declaration_list) @body) @def.struct

(enum_specifier
  name: (type_identifier) @name
  body: (enumerator_list) @body) @def.enum

(namespace_definition
  name: (namespace_identifier) @name
  body: (declaration_list) @body) @def.module

(alias_declaration
  name: (type_identifier) @name) @def.type

(type_definition
  declarator: (type_identifier) @name) @def.type

(concept_definition
  name: (identifier) @name) @def.type

(preproc_def
  name: (identifier) @name
  value: (preproc_arg)) @def.constant

(preproc_function_def
  name: (identifier) @name) @def.macro

(translation_unit
  (declaration
    (type_qualifier) @_const
    declarator: (init_declarator declarator: (identifier) @name)) @def.constant
  (#match? @_const "^(const|constexpr)$"))

(declaration_list
  (declaration
    (type_qualifier) @_const
    declarator: (init_declarator declarator: (identifier) @name)) @def.constant
  (#match? @_const "^(const|constexpr)$"))

(preproc_include
  path: (_) @import.module) @import
