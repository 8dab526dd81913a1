package indexfile

// HuggingFace is the split of a Hugging Face dataset an index lists the
// files of, where its source holds several (a DatasetDict's folder, a
// datasets cache folder): the index holds that split's files alone.
type HuggingFace struct {
	// Split is the split's name ("train").
	Split string `json:"split"`
}
