package broker

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/samsahq/samsa/internal/controller"
	"github.com/samsahq/samsa/internal/loglevel"
)

// BROKER_LOGGER resources (KIP-412), as Kafka's RuntimeLoggerManager: the
// resource name is this node's id; each config is a logger (loglevel.Root
// or a component) and its value a level name. SET needs a known logger
// and one of TRACE, DEBUG, INFO, WARN, ERROR, FATAL (INVALID_CONFIG
// otherwise); DELETE makes a logger follow root again (not root itself:
// INVALID_REQUEST); APPEND and SUBTRACT are INVALID_REQUEST. All
// operations are checked before any applies. Levels are not persisted.

// checkLoggerResource returns the INVALID_REQUEST of a BROKER_LOGGER
// resource name that is not this node's id, nil for this node's.
func (b *Broker) checkLoggerResource(name string) error {
	if name == "" {
		return fmt.Errorf("%w: Broker id must not be empty", controller.ErrInvalidRequest)
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return fmt.Errorf("%w: Node id must be an integer, but it is: %s", controller.ErrInvalidRequest, name)
	}
	if int32(id) != b.node.NodeID {
		return fmt.Errorf("%w: Unexpected node id. Expected %d, but received %s", controller.ErrInvalidRequest, b.node.NodeID, name)
	}
	return nil
}

func (b *Broker) alterLoggers(name string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, validateOnly bool) error {
	if err := b.checkLoggerResource(name); err != nil {
		return err
	}
	if b.levels == nil {
		return fmt.Errorf("%w: this node's log levels cannot be changed", controller.ErrInvalidRequest)
	}
	for _, op := range ops {
		if !loglevel.Known(op.Name) {
			return fmt.Errorf("%w: Logger %s does not exist", controller.ErrInvalidConfig, op.Name)
		}
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if _, err := loglevel.ParseLevel(deref(op.Value)); err != nil {
				return fmt.Errorf("%w: Cannot set the log level of %s to %s as it is not a supported log level: %v", controller.ErrInvalidConfig, op.Name, deref(op.Value), err)
			}
		case kmsg.IncrementalAlterConfigOpDelete:
			if op.Name == loglevel.Root {
				return fmt.Errorf("%w: Removing the log level of the %s logger is not allowed", controller.ErrInvalidRequest, loglevel.Root)
			}
		case kmsg.IncrementalAlterConfigOpAppend:
			return fmt.Errorf("%w: APPEND operation is not allowed for the BROKER_LOGGER resource", controller.ErrInvalidRequest)
		case kmsg.IncrementalAlterConfigOpSubtract:
			return fmt.Errorf("%w: SUBTRACT operation is not allowed for the BROKER_LOGGER resource", controller.ErrInvalidRequest)
		default:
			return fmt.Errorf("%w: Unknown operation type %d is not allowed for the BROKER_LOGGER resource", controller.ErrInvalidRequest, op.Op)
		}
	}
	if validateOnly {
		return nil
	}
	var errs []error
	for _, op := range ops {
		var err error
		if op.Op == kmsg.IncrementalAlterConfigOpSet {
			err = b.levels.Set(op.Name, *op.Value)
		} else {
			err = b.levels.Unset(op.Name)
		}
		if err == nil {
			b.logger.Warn("log level changed", "logger", op.Name, "level", deref(op.Value))
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
