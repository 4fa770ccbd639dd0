"""Robot descriptions shared by tasks: model file, frames, controllers and limits."""
