"""The stateful controller: durable state, lease, generations, timings, the control loop."""
