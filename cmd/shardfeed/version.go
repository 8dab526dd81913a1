package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shardfeed/shardfeed/internal/version"
	"github.com/shardfeed/shardfeed/sidecar/images"
	"github.com/shardfeed/shardfeed/sidecar/video"
)

// buildInfo is the version and what this binary was built with that a
// user asks about: the JPEG decoder of spec.decode (the cgo build links
// libjpeg-turbo, the portable one decodes in Go) and the video decoder of
// a lerobot stream's cameras (FFmpeg in the cgo build, none otherwise).
type buildInfo struct {
	version.Info
	JPEGDecoder  string `json:"jpegDecoder"`
	VideoDecoder string `json:"videoDecoder"`
}

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of shardfeed, of its plan algorithm and its JPEG and video decoders",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildInfo{Info: version.Get(), JPEGDecoder: images.JPEGDecoder, VideoDecoder: video.Decoder}
			return version.Write(cmd.OutOrStdout(), output, info, fmt.Sprintf("%s\nJPEG decoder: %s\nVideo decoder: %s\n", info.Info, info.JPEGDecoder, info.VideoDecoder))
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
