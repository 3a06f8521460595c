//go:build tools

// The real Argo workflow-controller that the e2e node stand-in runs; e2e/build.sh builds it.
package tools

import (
	_ "github.com/argoproj/argo-workflows/v4/cmd/workflow-controller"
)
