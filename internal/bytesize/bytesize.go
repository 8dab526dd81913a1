// Package bytesize writes byte counts for people to read.
package bytesize

import "fmt"

// Human is n in the largest binary unit it reaches, to one decimal:
// "512 B", "1.5 KiB", "37.3 TiB".
func Human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
