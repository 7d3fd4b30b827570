"""Tile memory storage categories and regions, as Poplar lists them (var_categories ids follow this order)."""

from __future__ import annotations

#: Storage categories, in Poplar's order, with what each holds (seed 004, Categories).
CATEGORY_DESCRIPTIONS = {
    "constant": "Constants added by the user.",
    "controlCode": "Code for Program objects and running compute sets.",
    "controlId": "Variables used in switch programs or storing sync ids.",
    "controlTable": "A table listing the vertices to run in each compute set (table scheduler only).",
    "copyDescriptor": "Variable-sized fields used by copy vertices.",
    "globalExchangeCode": "Code for exchanges between IPUs.",
    "globalExchangePacketHeader": "Packet headers for exchanges between IPUs.",
    "globalMessage": "Message data for exchanges between IPUs.",
    "hostExchangeCode": "Code for exchanges to and from the host.",
    "hostExchangePacketHeader": "Packet headers for host exchanges.",
    "hostMessage": "Message data for host exchanges.",
    "instrumentationResults": "Storage for profiling information.",
    "internalExchangeCode": "Code for internal exchanges.",
    "message": "Message data for internal exchanges.",
    "multiple": "Space shared by variables from several categories.",
    "outputEdge": "Output edge data stored before an exchange.",
    "rearrangement": "Rearranged versions of tensor data.",
    "sharedCodeStorage": "Code shared by vertices.",
    "sharedDataStorage": "Data shared by vertices.",
    "stack": "Worker and supervisor stacks.",
    "variable": "Variables created in the program.",
    "vectorListDescriptor": "The data of VectorList<Input<...>, DeltaN> fields.",
    "vertexCode": "Code of vertex functions (codelets).",
    "vertexFieldData": "Variable-sized vertex fields such as Vector<float>.",
    "vertexInstanceState": "Vertex class instances: sizeof(VertexName) per vertex.",
    "dwarf": "DWARF debugging information.",
}
#: The category names, in order.
CATEGORIES = tuple(CATEGORY_DESCRIPTIONS)
#: Most categories a report may declare: Poplar's list and room for as many again that a later Poplar
#: adds (a converter keeps those). It bounds the columns of memory_category_by_tile (6 per category).
MAX_CATEGORIES = 2 * len(CATEGORIES)
#: Memory regions, in the column order of matrix memory_category_by_tile.
MEMORY_REGIONS = ("interleaved", "nonInterleaved", "overflowed")
