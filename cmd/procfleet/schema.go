package main

import (
	"bytes"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/procfleet/procfleet/spec"
)

func newSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of a fleet-file document",
		Long: `Schema prints the JSON Schema of one fleet-file document (a Server),
generated from procfleet's own types. Editors that understand the
yaml-language-server modeline complete and check fields with it:

  # yaml-language-server: $schema=./server.schema.json`,
		Example: `  # Save the schema next to your fleet file
  procfleet schema > server.schema.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := schemaBytes()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
}

// schemaBytes is the exact output of `procfleet schema`: spec.Schema()
// ending in one newline. examples/schema/server.schema.json holds the same bytes.
func schemaBytes() ([]byte, error) {
	b, err := spec.Schema()
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	return append(bytes.TrimRight(b, "\n"), '\n'), nil
}
