; C++: function definitions, classes, namespaces, methods (in-class, and out-of-class via Type::name),
; aliases, concepts and const/constexpr in namespaces; what C++ shares with C is in cfamily.scm,
; appended to this file.

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

(class_specifier
  name: (type_identifier) @name
  body: (field_declaration_list) @body) @def.class

(namespace_definition
  name: (namespace_identifier) @name
  body: (declaration_list) @body) @def.module

(alias_declaration
  name: (type_identifier) @name) @def.type

(concept_definition
  name: (identifier) @name) @def.type

(declaration_list
  (declaration
    (type_qualifier) @_const
    declarator: (init_declarator declarator: (identifier) @name)) @def.constant
  (#match? @_const "^(const|constexpr)$"))
