package lancefile

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Field is one field of a Lance schema (lance.file.Field), in the schema's
// depth-first order; Parent is -1 for a top-level field.
type Field struct {
	Name        string
	ID, Parent  int32
	LogicalType string
	Nullable    bool
	Extension   string
	Metadata    map[string]string
	// Blob: a blob column (lance-encoding:blob, or the lance.blob.v2
	// extension), stored as descriptors of where each value's bytes lie.
	Blob bool
}

// blobExtension is the extension name of Lance's blob v2 columns.
const blobExtension = "lance.blob.v2"

// IsBlob says whether a field of a manifest is a blob column.
func IsBlob(extension string, metadata map[string]string) bool {
	return extension == blobExtension || metadata["lance-encoding:blob"] == "true"
}

// Node is a field with its children: the shape Arrow gives it.
type Node struct {
	Field
	Type     arrow.DataType
	Children []*Node
	// Err says why this reader does not decode the field (nil: it does).
	Err error
}

// Leaves lists the ids of the node's leaf fields (its own, for a leaf).
func (n *Node) Leaves() []int32 {
	if len(n.Children) == 0 {
		return []int32{n.ID}
	}
	var out []int32
	for _, c := range n.Children {
		out = append(out, c.Leaves()...)
	}
	return out
}

// Tree builds the schema's top-level fields with their children, mapping
// each to its Arrow type; it refuses what this reader does not decode.
func Tree(fields []Field) ([]*Node, error) {
	top, err := Nodes(fields)
	if err != nil {
		return nil, err
	}
	return top, Readable(top)
}

// Readable refuses the first of nodes this reader does not decode.
func Readable(nodes []*Node) error {
	for _, n := range nodes {
		if n.Err != nil {
			return n.Err
		}
	}
	return nil
}

// Nodes is Tree keeping the fields this reader does not decode, each with
// its Err, for a projection that may leave them out.
func Nodes(fields []Field) ([]*Node, error) {
	byID := map[int32]*Node{}
	var top []*Node
	for _, f := range fields {
		n := &Node{Field: f}
		if _, dup := byID[f.ID]; dup {
			return nil, corrupt("field id %d twice", f.ID)
		}
		byID[f.ID] = n
		if f.Parent == -1 {
			top = append(top, n)
			continue
		}
		p, ok := byID[f.Parent]
		if !ok {
			return nil, corrupt("field %q's parent %d comes after it or not at all", f.Name, f.Parent)
		}
		p.Children = append(p.Children, n)
	}
	for _, n := range top {
		if err := n.resolve(0); err != nil {
			if !errorsIs(err, ErrUnsupported) {
				return nil, err
			}
			n.Err = err
		}
	}
	return top, nil
}

func unsupported(n *Node, why string) error {
	return fmt.Errorf("%w: column %q (%s): %s; rewrite the table without it, or select other columns", ErrUnsupported, n.Name, n.LogicalType, why)
}

// resolve sets the node's Arrow type; depth counts the lists and structs
// above it.
func (n *Node) resolve(depth int) error {
	if n.Blob || IsBlob(n.Extension, n.Metadata) {
		return n.resolveBlob(depth)
	}
	if n.Extension != "" {
		return unsupported(n, "an extension column ("+n.Extension+")")
	}
	switch n.LogicalType {
	case "struct":
		if n.Metadata["lance-encoding:packed"] == "true" {
			// Its fields are one column of the struct's own id, not a
			// column each: read as fields, it would be all null.
			return unsupported(n, "a packed struct (lance-encoding:packed: its fields stored together in one column); shardfeed reads structs stored field by field")
		}
		if depth > 0 {
			return unsupported(n, "nested more than one level deep (shardfeed reads one struct or list level)")
		}
		fields := make([]arrow.Field, len(n.Children))
		for i, c := range n.Children {
			if err := c.resolve(depth + 1); err != nil {
				return err
			}
			if len(c.Children) > 0 {
				return unsupported(c, "nested more than one level deep (shardfeed reads one struct or list level)")
			}
			fields[i] = arrow.Field{Name: c.Name, Type: c.Type, Nullable: c.Nullable}
		}
		n.Type = arrow.StructOf(fields...)
		return nil
	case "list", "large_list":
		if depth > 0 || len(n.Children) != 1 {
			return unsupported(n, "a list nested more than one level deep, or of no item")
		}
		c := n.Children[0]
		if err := c.resolve(depth + 1); err != nil {
			return err
		}
		if len(c.Children) > 0 || isFSL(c.Type) {
			return unsupported(n, "a list of nested values (shardfeed reads one struct or list level)")
		}
		item := arrow.Field{Name: c.Name, Type: c.Type, Nullable: c.Nullable}
		if n.LogicalType == "list" {
			n.Type = arrow.ListOfField(item)
		} else {
			n.Type = arrow.LargeListOfField(item)
		}
		return nil
	}
	if strings.HasPrefix(n.LogicalType, "list.") || strings.HasPrefix(n.LogicalType, "large_list.") {
		return unsupported(n, "a list of structs or lists, nested two levels deep (shardfeed reads one struct or list level); flatten it into columns")
	}
	if len(n.Children) > 0 {
		return unsupported(n, "a nested type shardfeed does not read (maps, unions)")
	}
	t, err := leafType(n.LogicalType)
	if err != nil {
		return unsupported(n, err.Error())
	}
	n.Type = t
	return nil
}

// resolveBlob types a blob column: its values are served as the bytes its
// descriptors point at. Blob v1 is a large_binary field; v2 a struct of
// the logical blob (data, uri, position, size) stored as one column of
// the struct's own id.
func (n *Node) resolveBlob(depth int) error {
	n.Blob = true
	switch {
	case depth > 0:
		return unsupported(n, "a blob column inside a struct or list (shardfeed reads top-level blob columns)")
	case n.Extension == blobExtension && n.LogicalType != "struct",
		n.Extension != blobExtension && n.LogicalType != "large_binary" && n.LogicalType != "binary":
		return unsupported(n, "a blob column of logical type "+n.LogicalType)
	}
	n.Children = nil // the struct's fields are not columns of their own
	n.Type = arrow.BinaryTypes.LargeBinary
	return nil
}

func isFSL(t arrow.DataType) bool { _, ok := t.(*arrow.FixedSizeListType); return ok }

var leafTypes = map[string]arrow.DataType{
	"bool": arrow.FixedWidthTypes.Boolean, "int8": arrow.PrimitiveTypes.Int8, "int16": arrow.PrimitiveTypes.Int16,
	"int32": arrow.PrimitiveTypes.Int32, "int64": arrow.PrimitiveTypes.Int64, "uint8": arrow.PrimitiveTypes.Uint8,
	"uint16": arrow.PrimitiveTypes.Uint16, "uint32": arrow.PrimitiveTypes.Uint32, "uint64": arrow.PrimitiveTypes.Uint64,
	"halffloat": arrow.FixedWidthTypes.Float16, "float": arrow.PrimitiveTypes.Float32, "double": arrow.PrimitiveTypes.Float64,
	"string": arrow.BinaryTypes.String, "large_string": arrow.BinaryTypes.LargeString, "binary": arrow.BinaryTypes.Binary,
	"large_binary": arrow.BinaryTypes.LargeBinary, "date32:day": arrow.FixedWidthTypes.Date32, "date64:ms": arrow.FixedWidthTypes.Date64,
}

// leafType maps a leaf's logical type ("timestamp:us:UTC",
// "fixed_size_list:float:16") to its Arrow type.
func leafType(lt string) (arrow.DataType, error) {
	if t, ok := leafTypes[lt]; ok {
		return t, nil
	}
	parts := strings.Split(lt, ":")
	switch parts[0] {
	case "timestamp":
		if len(parts) < 2 {
			break
		}
		unit, ok := map[string]arrow.TimeUnit{"s": arrow.Second, "ms": arrow.Millisecond, "us": arrow.Microsecond, "ns": arrow.Nanosecond}[parts[1]]
		if !ok {
			break
		}
		tz := strings.Join(parts[2:], ":")
		if tz == "-" {
			tz = ""
		}
		return &arrow.TimestampType{Unit: unit, TimeZone: tz}, nil
	case "decimal":
		if len(parts) != 4 || parts[1] != "128" {
			break
		}
		p, err1 := strconv.Atoi(parts[2])
		s, err2 := strconv.Atoi(parts[3])
		if err1 != nil || err2 != nil || p < 1 || p > 38 || s < -p || s > p {
			break
		}
		return &arrow.Decimal128Type{Precision: int32(p), Scale: int32(s)}, nil //nolint:gosec // checked
	case "fixed_size_binary":
		if w, err := strconv.Atoi(strings.Join(parts[1:], ":")); err == nil && w > 0 && w <= 1<<20 {
			return &arrow.FixedSizeBinaryType{ByteWidth: w}, nil
		}
	case "fixed_size_list":
		if len(parts) < 3 {
			break
		}
		dim, err := strconv.Atoi(parts[len(parts)-1])
		item, ierr := leafType(strings.Join(parts[1:len(parts)-1], ":"))
		if err != nil || ierr != nil || dim <= 0 || dim > 1<<20 {
			break
		}
		if _, fixed := item.(arrow.FixedWidthDataType); !fixed || item.ID() == arrow.BOOL || isFSL(item) {
			return nil, fmt.Errorf("a fixed-size list of %s: shardfeed reads fixed-size lists of numbers", item)
		}
		return arrow.FixedSizeListOf(int32(dim), item), nil //nolint:gosec // checked
	case "dict":
		// dict:VALUE:INDEX:ORDERED, decoded to its values.
		if len(parts) >= 4 {
			return leafType(strings.Join(parts[1:len(parts)-2], ":"))
		}
	}
	return nil, fmt.Errorf("logical type %q is not one shardfeed reads", lt)
}
