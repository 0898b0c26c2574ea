export class Safe {
  error(err: any): void {
    const { partialObserver } = this;
    if (partialObserver.error) {
      try {
        partialObserver.error(err);
      <CURSOR>
        handleUnhandledError(error);
      }
    } else {
      handleUnhandledError(err);
    }
  }
}
